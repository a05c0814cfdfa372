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

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gix::ObjectId;
use gix::hash::Kind as HashKind;
use gix::objs::{Find as _, Kind};

use super::pack::{self, Obj};
use super::refs::RefStorage;
use crate::ledger::canonical::{self, Value};
use crate::ledger::hash::sha256_hex;
use crate::ledger::{Entry, NewEntry, Storage, StorageError};

/// Where every ledger ref lives.
pub const LEDGER_PREFIX: &str = "refs/forum/ledgers/";
/// The file name of the one blob in an entry's tree.
pub const PAYLOAD_FILE: &str = "payload.json";
/// The fixed committer of every ledger commit.
pub const COMMITTER: &str = "git-forum <ledger@git-forum.invalid>";
pub(crate) const AUTHOR_EMAIL: &str = "ledger@git-forum.invalid";
/// A ref `.lock` file older than this, found while we hold the ledger's writer lock, was left by
/// a writer that died; git's own writers hold ref locks for milliseconds.
pub const STALE_REF_LOCK: Duration = Duration::from_secs(2);
/// How long an append keeps retrying a contended ref before giving up.
pub const APPEND_DEADLINE: Duration = Duration::from_secs(30);
/// Consolidate packs (`git repack -d --geometric=2`) once a repository holds more than this
/// many; gix handles also size their index slots from the count at open.
pub const MAX_PACKS: usize = 24;

/// Errors of the git store. Each message is one line that names the problem and what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not inside a git repository ({0}); run git forum inside a repository or pass -C DIR")]
    NotARepo(String),
    #[error("invalid ledger name {name:?}: {why}")]
    InvalidName { name: String, why: String },
    #[error(
        "no ledger named {0:?} (refs/forum/ledgers/{0} does not exist); list ledgers with `git for-each-ref refs/forum/ledgers`"
    )]
    NoLedger(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Corrupt(String),
    #[error("{0}")]
    Contended(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Git(String),
}

impl From<StoreError> for StorageError {
    fn from(e: StoreError) -> StorageError {
        match e {
            StoreError::Invalid(m) | StoreError::InvalidName { why: m, .. } => {
                StorageError::Invalid(m)
            }
            StoreError::Corrupt(m) => StorageError::Corrupt(m),
            other => StorageError::Io(other.to_string()),
        }
    }
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> StoreError {
    let context = context.into();
    move |source| StoreError::Io { context, source }
}

pub(crate) fn git_err(context: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Git(format!("{context}: {e}"))
}

/// Checks a ledger name against git's ref-name rules (`git check-ref-format`) plus our own:
/// no leading `-` (it would read as an option) and nothing but printable ASCII.
pub fn validate_ledger_name(name: &str) -> Result<(), StoreError> {
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
    pub commit: ObjectId,
    pub entry: Entry,
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

/// How a durable append flushes (`git config forum.fsyncMethod wal|fsync|batch|syncfs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushMethod {
    /// The default on Linux: the append writes its objects and moves the ref without flushing
    /// them, then logs a record holding them to the ledger's write-ahead log
    /// (`.git/forum/wal/NAME.wal`, created zero-filled at full size) and flushes that one file,
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

    fn syncfs(self) -> bool {
        cfg!(target_os = "linux") && self == FlushMethod::Syncfs
    }

    fn batch(self) -> bool {
        cfg!(target_os = "linux") && self == FlushMethod::Batch
    }

    pub(crate) fn wal(self) -> bool {
        cfg!(target_os = "linux") && self == FlushMethod::Wal
    }
}

/// Starts writeback of `f`'s data without waiting for it (Linux `sync_file_range` with
/// `SYNC_FILE_RANGE_WRITE`), so a later fsync of another file on the same filesystem also
/// waits for it: the first half of git's batch fsync. Elsewhere it does nothing.
#[allow(unsafe_code)]
fn start_writeback(f: &File) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: sync_file_range only reads its integer arguments; the descriptor is valid for
        // the duration of the call because `f` is borrowed.
        let rc = unsafe { libc::sync_file_range(f.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = f;
    Ok(())
}

/// A commit parsed just enough for the ledger.
pub(crate) struct RawCommit<'a> {
    pub(crate) tree: ObjectId,
    pub(crate) parents: Vec<ObjectId>,
    pub(crate) message: &'a [u8],
}

pub(crate) fn parse_commit(data: &[u8], hash: HashKind) -> Option<RawCommit<'_>> {
    let split = (1..data.len()).find(|&i| data[i] == b'\n' && data[i - 1] == b'\n')? - 1;
    let (headers, message) = (&data[..split], &data[split + 2..]);
    let mut tree = None;
    let mut parents = Vec::new();
    for line in headers.split(|b| *b == b'\n') {
        if let Some(hex) = line.strip_prefix(b"tree ") {
            tree = Some(ObjectId::from_hex(hex).ok()?);
        } else if let Some(hex) = line.strip_prefix(b"parent ") {
            parents.push(ObjectId::from_hex(hex).ok()?);
        }
    }
    let tree = tree?;
    if tree.kind() != hash {
        return None;
    }
    Some(RawCommit {
        tree,
        parents,
        message,
    })
}

/// The entry stored in a ledger commit message (its last line).
pub(crate) fn entry_from_message(message: &[u8]) -> Result<Entry, String> {
    entry_from_message_checked(message).map(|(e, _)| e)
}

/// Like [`entry_from_message`], also saying whether the entry line is exactly
/// `entry.canonical_json()`: the fast reader accepts nothing else, so when it read the line the
/// caller need not write the entry out again to compare.
pub(crate) fn entry_from_message_checked(message: &[u8]) -> Result<(Entry, bool), String> {
    let text =
        std::str::from_utf8(message).map_err(|_| "commit message is not UTF-8".to_string())?;
    let line = text
        .trim_end_matches('\n')
        .rsplit('\n')
        .next()
        .unwrap_or("");
    if let Some(e) = Entry::from_canonical_json(line) {
        return Ok((e, true));
    }
    let v = canonical::parse(line)
        .map_err(|e| format!("commit message does not end in an entry: {e}"))?;
    Entry::from_value(&v).map(|e| (e, false))
}

/// Appends a one-line rendition of `s` safe for a commit subject or author name: control
/// characters and the `forbidden` ones become `_`, surrounding whitespace is trimmed, and an
/// empty result becomes `-`.
fn push_one_line(out: &mut String, s: &str, forbidden: &str) {
    let start = out.len();
    if s.chars().any(|c| c.is_control() || forbidden.contains(c)) {
        out.extend(s.chars().map(|c| {
            if c.is_control() || forbidden.contains(c) {
                '_'
            } else {
                c
            }
        }));
    } else {
        out.push_str(s);
    }
    let trimmed = out[start..].trim();
    if trimmed.len() != out.len() - start {
        let t = trimmed.to_string();
        out.truncate(start);
        out.push_str(&t);
    }
    if out.len() == start {
        out.push('-');
    }
}

/// A one-line rendition of `s` safe for a commit subject or author name.
fn one_line(s: &str, forbidden: &str) -> String {
    let mut out = String::with_capacity(s.len());
    push_one_line(&mut out, s, forbidden);
    out
}

/// Seconds for the commit dates: the entry's `ts` floored, kept within git's date range.
fn commit_seconds(ts: f64) -> i64 {
    if ts.is_finite() {
        ts.floor().clamp(0.0, 253_402_300_799.0) as i64
    } else {
        0
    }
}

fn push_subject(out: &mut String, entry: &Entry) {
    use std::fmt::Write as _;
    let start = out.len();
    out.push_str(&entry.kind);
    let _ = write!(out, " #{} by ", entry.seq);
    out.push_str(&entry.actor);
    let subject = out.split_off(start);
    push_one_line(out, &subject, "");
}

/// The commit message: subject, blank line, the entry as canonical JSON.
pub fn commit_message(entry: &Entry) -> String {
    let mut out = String::with_capacity(400);
    push_subject(&mut out, entry);
    out.push_str("\n\n");
    out.push_str(&entry.canonical_json());
    out.push('\n');
    out
}

/// The exact bytes of the commit for `entry` with `tree` and `parent`.
pub fn commit_bytes(entry: &Entry, tree: &ObjectId, parent: Option<&ObjectId>) -> Vec<u8> {
    let mut out = commit_head(entry, tree, parent);
    out.push_str(&entry.canonical_json());
    out.push('\n');
    out.into_bytes()
}

/// The commit for `entry` up to its last line (the canonical entry JSON and a newline).
pub(crate) fn commit_head(entry: &Entry, tree: &ObjectId, parent: Option<&ObjectId>) -> String {
    use std::fmt::Write as _;
    let secs = commit_seconds(entry.ts);
    let mut out = String::with_capacity(700);
    out.push_str("tree ");
    crate::ledger::hash::push_hex(&mut out, tree.as_slice());
    if let Some(p) = parent {
        out.push_str("\nparent ");
        crate::ledger::hash::push_hex(&mut out, p.as_slice());
    }
    out.push_str("\nauthor ");
    push_one_line(&mut out, &entry.actor, "<>");
    let _ = write!(
        out,
        " <{AUTHOR_EMAIL}> {secs} +0000\ncommitter {COMMITTER} {secs} +0000\n\n"
    );
    push_subject(&mut out, entry);
    out.push_str("\n\n");
    out
}

/// Whether `data` is exactly the commit of `entry` with `tree` and `parent`. `line_canonical`
/// says the message's last line is already known to be `entry.canonical_json()`.
pub(crate) fn is_commit_of(
    data: &[u8],
    entry: &Entry,
    tree: &ObjectId,
    parent: Option<&ObjectId>,
    line_canonical: bool,
) -> bool {
    let head = commit_head(entry, tree, parent);
    let Some(rest) = data.strip_prefix(head.as_bytes()) else {
        return false;
    };
    let Some(line) = rest.strip_suffix(b"\n") else {
        return false;
    };
    if line_canonical {
        !line.contains(&b'\n')
    } else {
        line == entry.canonical_json().as_bytes()
    }
}

/// The tree holding one body blob.
pub fn tree_bytes(blob: &ObjectId) -> Vec<u8> {
    let mut out = format!("100644 {PAYLOAD_FILE}\0").into_bytes();
    out.extend_from_slice(blob.as_slice());
    out
}

/// The 32 bytes of a 64-digit hex hash (entry hashes were checked to be lowercase hex).
pub(crate) fn hex_to_bytes(h: &str) -> [u8; 32] {
    fn nibble(b: u8) -> u8 {
        match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => 0,
        }
    }
    let mut out = [0u8; 32];
    for (o, pair) in out.iter_mut().zip(h.as_bytes().chunks_exact(2)) {
        *o = (nibble(pair[0]) << 4) | nibble(pair[1]);
    }
    out
}

/// Opens the repository that contains `dir` (honouring `GIT_DIR`).
pub fn open_repo(dir: &Path) -> Result<gix::Repository, StoreError> {
    let repo = gix::ThreadSafeRepository::discover_with_environment_overrides(dir)
        .map_err(|e| StoreError::NotARepo(format!("{e}")))?;
    Ok(repo.to_thread_local())
}

/// A ledger in a git repository.
pub struct GitStore {
    repo: gix::Repository,
    name: String,
    refname: String,
    hash: HashKind,
    opts: Options,
    /// Where refs, reflogs and `forum/` live (the common dir of a worktree).
    common_dir: PathBuf,
    /// For a copy held under another ref (a fetched one): the ledger name its checkpoint
    /// signatures sign, and the ref holding them.
    signatures_at: Option<(String, String)>,
    /// The last tip this handle read or wrote. A commit id names its content, so when the ref
    /// still names this commit its entry need not be read and parsed again.
    last_tip: std::sync::Mutex<Option<Tip>>,
    /// The repository keeps refs somewhere other than files (reftable): the ledger ref is read
    /// and moved through `git` (see `refs.rs`), never as a loose file.
    refs_via_git: bool,
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
    pub fn at_ref(
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
            tip_via_git: std::sync::Mutex::new(None),
        })
    }

    /// Reads checkpoint signatures for `ledger` from `refname` (a fetched copy's signatures sit
    /// beside it, not on the local ledger's ref).
    pub fn with_signatures(mut self, ledger: &str, refname: &str) -> GitStore {
        self.signatures_at = Some((ledger.to_string(), refname.to_string()));
        self
    }

    /// The ledger name checkpoint signatures sign.
    pub fn signature_ledger(&self) -> &str {
        self.signatures_at
            .as_ref()
            .map(|(l, _)| l.as_str())
            .unwrap_or(&self.name)
    }

    /// The ref holding this ledger's signed checkpoints.
    pub fn signatures_ref(&self) -> String {
        match &self.signatures_at {
            Some((_, r)) => r.clone(),
            None => super::sign::checkpoints_ref(&self.name),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn refname(&self) -> &str {
        &self.refname
    }

    pub fn repo(&self) -> &gix::Repository {
        &self.repo
    }

    pub fn object_hash(&self) -> HashKind {
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
    pub fn refs_via_git(&self) -> bool {
        self.refs_via_git
    }

    pub fn set_fsync(&mut self, fsync: bool) {
        self.opts.fsync = fsync;
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
    pub fn tip_id(&self) -> Result<Option<ObjectId>, StoreError> {
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
    pub fn exists(&self) -> Result<bool, StoreError> {
        Ok(self.tip_id()?.is_some())
    }

    pub(crate) fn read_raw(
        &self,
        id: &ObjectId,
        buf: &mut Vec<u8>,
    ) -> Result<Option<Kind>, StoreError> {
        match self.repo.objects.try_find(id, buf) {
            Ok(Some(d)) => Ok(Some(d.kind)),
            Ok(None) => Ok(None),
            Err(e) => Err(git_err(&format!("reading object {id}"), e)),
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
        let tip = Tip { commit, entry };
        *last = Some(tip.clone());
        Ok(Some(tip))
    }

    /// The tip, or [`StoreError::NoLedger`].
    pub fn require_tip(&self) -> Result<Tip, StoreError> {
        self.tip()?
            .ok_or_else(|| StoreError::NoLedger(self.name.clone()))
    }

    /// Commit ids from the tip back to `stop_seq` (inclusive), newest first, with their entries.
    pub fn walk_back(&self, limit: Option<u64>) -> Result<Vec<(ObjectId, Entry)>, StoreError> {
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

    /// Every commit id from seq 0 to the tip, reading commits only.
    pub fn chain_ids(&self) -> Result<Vec<ObjectId>, StoreError> {
        self.chain_ids_from(self.tip_id()?)
    }

    /// The commit ids from `start` back to the root, oldest first. Callers that already read
    /// the tip pass it, so an append landing meanwhile cannot make the walk disagree with it.
    fn chain_ids_from(&self, start: Option<ObjectId>) -> Result<Vec<ObjectId>, StoreError> {
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
    pub fn commit_at(&self, seq: u64) -> Result<Option<ObjectId>, StoreError> {
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
    pub fn get_with_commit(&self, seq: u64) -> Result<Option<(Entry, ObjectId)>, StoreError> {
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
    pub fn body_of_commit(&self, id: &ObjectId) -> Result<Option<Vec<u8>>, StoreError> {
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

    // ----- the seq → commit index (a cache; never used by verify) -----

    pub(crate) fn index_path(&self) -> PathBuf {
        self.forum_dir()
            .join("index")
            .join(format!("{}.idx", self.name))
    }

    /// The index, extended or rebuilt until it agrees with `tip`.
    fn index_for(&self, tip: &Tip) -> Result<IndexView, StoreError> {
        let width = self.hash.len_in_bytes();
        let path = self.index_path();
        let want = tip.entry.seq + 1;
        if let Ok(mut f) = File::open(&path) {
            // The length by seeking (see `read_without_stat`).
            let len = f.seek(SeekFrom::End(0)).unwrap_or(0);
            if len % width as u64 == 0 && len > 0 {
                let count = len / width as u64;
                let mut last = vec![0u8; width];
                if f.seek(SeekFrom::Start((count - 1) * width as u64)).is_ok()
                    && f.read_exact(&mut last).is_ok()
                {
                    let last = ObjectId::from_bytes_or_panic(&last);
                    if count == want && last == tip.commit {
                        return Ok(IndexView { path, width, count });
                    }
                    if count < want {
                        // Extend: walk back from the tip to the last indexed seq.
                        let mut missing = Vec::new();
                        let mut cur = Some(tip.commit);
                        let mut buf = Vec::new();
                        while let Some(id) = cur {
                            let (e, _, parent) = self.read_entry_commit(&id, &mut buf)?;
                            if e.seq + 1 == count {
                                if id == last {
                                    missing.reverse();
                                    self.write_index(&path, Some(&missing))?;
                                    return Ok(IndexView {
                                        path,
                                        width,
                                        count: want,
                                    });
                                }
                                break;
                            }
                            if e.seq < count {
                                break;
                            }
                            missing.push(id);
                            cur = parent;
                        }
                    }
                }
            }
        }
        let ids = self.chain_ids_from(Some(tip.commit))?;
        if ids.len() as u64 != want {
            return Err(StoreError::Corrupt(format!(
                "ledger {}: the tip holds seq {} but the chain has {} commits; run `git forum verify`",
                self.name,
                tip.entry.seq,
                ids.len()
            )));
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        let bytes = id_bytes(&ids);
        // A temporary file of our own: two readers rebuilding at once must not share one.
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io(format!(
            "creating a temporary file in {}",
            dir.display()
        )))?;
        tmp.write_all(&bytes)
            .map_err(io(format!("writing {}", tmp.path().display())))?;
        tmp.persist(&path)
            .map_err(|e| e.error)
            .map_err(io(format!("renaming into {}", path.display())))?;
        Ok(IndexView {
            path,
            width,
            count: want,
        })
    }

    /// Appends `ids` to the index file (the caller checked it is current up to their parent).
    fn write_index(&self, path: &Path, ids: Option<&[ObjectId]>) -> Result<(), StoreError> {
        let Some(ids) = ids else { return Ok(()) };
        let mut f = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io(format!("opening {}", path.display())))?;
        f.write_all(&id_bytes(ids))
            .map_err(io(format!("writing {}", path.display())))
    }

    /// After an append from `parent` (at `parent_seq`) to `new`, extends the index if it was
    /// current; otherwise leaves it for the next read to repair.
    fn index_after_append(&self, parent: Option<(ObjectId, u64)>, new: &[ObjectId]) {
        let width = self.hash.len_in_bytes() as u64;
        let path = self.index_path();
        // One open: a new ledger starts an empty index; otherwise the last id is checked and
        // the new ones are appended after it.
        let file = match parent {
            None => {
                if let Some(dir) = path.parent() {
                    let _ = fs::create_dir_all(dir);
                }
                File::create(&path).ok()
            }
            Some((pid, pseq)) => (|| {
                let f = OpenOptions::new()
                    .read(true)
                    .append(true)
                    .open(&path)
                    .ok()?;
                let len = (&f).seek(SeekFrom::End(0)).ok()?;
                if len != (pseq + 1) * width {
                    return None;
                }
                let mut last = vec![0u8; width as usize];
                read_exact_at(&f, &mut last, len - width).ok()?;
                (ObjectId::from_bytes_or_panic(&last) == pid).then_some(f)
            })(),
        };
        if let Some(mut f) = file {
            let _ = f.write_all(&id_bytes(new));
        }
    }

    // ----- writing -----

    /// The ledger's writer-lock file.
    pub(crate) fn writer_lock_path(&self) -> PathBuf {
        self.forum_dir()
            .join("locks")
            .join(format!("{}.lock", self.name.replace('/', "%2F")))
    }

    /// Takes the ledger's writer lock (advisory, released by the kernel if we die).
    pub(crate) fn writer_lock(&self) -> Result<File, StoreError> {
        let path = self.writer_lock_path();
        let f = create_in_dir(&path, || {
            OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(&path)
        })
        .map_err(io(format!("opening {}", path.display())))?;
        f.lock()
            .map_err(io(format!("locking {}", path.display())))?;
        Ok(f)
    }

    /// Writes new loose objects (skipping blobs and trees the repository has; commits are
    /// appended entries, new by construction, and written without asking. With `replace`, a
    /// loose file of the same name, perhaps damaged, is replaced) and, with `durable`, makes
    /// them durable according to the flush method. Returns the paths of the files written.
    pub(crate) fn write_loose_objects(
        &self,
        objs: &[Obj],
        durable: bool,
        replace: bool,
    ) -> Result<Vec<PathBuf>, StoreError> {
        let method = self.opts.method;
        let mut staged: Vec<(Staged, PathBuf, File)> = Vec::new();
        let mut z = Vec::new();
        for o in objs {
            let hex = o.id.to_hex().to_string();
            let dir = self.objects_dir().join(&hex[..2]);
            let path = dir.join(&hex[2..]);
            // A new entry's commit names its parent, so only the blob and the tree can be
            // present already (a commit that is, after a lost race, gets linked over; see below).
            if !replace && o.kind != Kind::Commit && self.repo.objects.exists_without_refresh(&o.id)
            {
                continue;
            }
            let mut raw = format!("{} {}\0", o.kind, o.data.len()).into_bytes();
            raw.extend_from_slice(&o.data);
            with_fast_compressor(|c| {
                z.resize(c.zlib_compress_bound(raw.len()), 0);
                let n = c.zlib_compress(&raw, &mut z)?;
                z.truncate(n);
                Ok(())
            })
            .map_err(|e: libdeflater::CompressionError| {
                io("compressing an object")(std::io::Error::other(e.to_string()))
            })?;
            // Replacing needs a rename over the old file; otherwise an anonymous file linked
            // in once written (one directory change instead of two, see `AnonObject`).
            let anon = if replace {
                None
            } else {
                AnonObject::create(&dir)
            };
            let (staged_as, mut f) = match anon {
                Some(a) => (Staged::Anon(a.link_source), a.file),
                None => {
                    // Beside the fan-out directories, not in one: `git prune` deletes every
                    // `tmp_obj_*` there (with `--expire=now`, however new) and removes empty
                    // fan-out directories, either of which would make the rename fail.
                    let tmp = self
                        .objects_dir()
                        .join(format!("forum_tmp_{}_{}", pid(), unique()));
                    let f = create_in_dir(&tmp, || {
                        OpenOptions::new().write(true).create_new(true).open(&tmp)
                    })
                    .map_err(io(format!("creating {}", tmp.display())))?;
                    (Staged::Named(tmp), f)
                }
            };
            f.write_all(&z)
                .map_err(io(format!("writing {}", path.display())))?;
            if durable && method.batch() {
                start_writeback(&f).map_err(io(format!("writing back {}", path.display())))?;
            } else if durable && !method.syncfs() {
                f.sync_data()
                    .map_err(io(format!("fsync {}", path.display())))?;
            }
            staged.push((staged_as, path, f));
        }
        if durable
            && method.batch()
            && let Some((_, path, f)) = staged.last()
        {
            // One full flush: waits for every writeback started above.
            f.sync_all()
                .map_err(io(format!("fsync {}", path.display())))?;
        }
        let mut written = Vec::with_capacity(staged.len());
        for (staged_as, path, f) in staged {
            match staged_as {
                Staged::Named(tmp) => {
                    drop(f);
                    let mut tries = 0;
                    while let Err(e) = fs::rename(&tmp, &path) {
                        // The fan-out directory was removed by a prune: make it again.
                        if e.kind() == std::io::ErrorKind::NotFound && tries < 8 && tmp.exists() {
                            tries += 1;
                            if let Some(d) = path.parent() {
                                let _ = fs::create_dir_all(d);
                            }
                            continue;
                        }
                        let _ = fs::remove_file(&tmp);
                        return Err(io(format!("renaming {}", tmp.display()))(e));
                    }
                }
                Staged::Anon(source) => {
                    let mut tries = 0;
                    loop {
                        match fs_link_follow(&source, &path) {
                            Ok(()) => break,
                            // Written meanwhile by someone else: the name is the content's hash.
                            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => break,
                            // `git gc` / `git prune` removed the empty fan-out directory after
                            // the file was opened in it: make it again and link there.
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 8 => {
                                tries += 1;
                                if let Some(dir) = path.parent() {
                                    let _ = fs::create_dir_all(dir);
                                }
                            }
                            Err(e) => return Err(io(format!("linking {}", path.display()))(e)),
                        }
                    }
                    drop(f);
                }
            }
            written.push(path);
        }
        if durable && !method.batch() {
            self.flush(&written, true)?;
        }
        Ok(written)
    }

    /// Makes `written` durable. Per file: each file's data (object files were synced before
    /// their rename, so only the ref and reflog are synced here) and each parent directory, so
    /// the new names survive a crash. With `syncfs`: one flush of the whole filesystem.
    pub(crate) fn flush(&self, written: &[PathBuf], files_synced: bool) -> Result<(), StoreError> {
        if !self.opts.fsync {
            return Ok(());
        }
        if self.opts.method.syncfs() {
            let f = File::open(&self.common_dir)
                .map_err(io("opening the git directory to flush it"))?;
            return rustix::fs::syncfs(&f)
                .map_err(|e| io("flushing the repository to disk (syncfs)")(e.into()));
        }
        if self.opts.method.batch() {
            // Start writeback of every file but the last, then one fsync of the last commits
            // them, and every rename before it, in one journal transaction.
            let Some((last, rest)) = written.split_last() else {
                return Ok(());
            };
            for p in rest {
                if let Ok(f) = File::open(p) {
                    start_writeback(&f).map_err(io(format!("writing back {}", p.display())))?;
                }
            }
            let f = File::open(last).map_err(io(format!("opening {}", last.display())))?;
            return f
                .sync_all()
                .map_err(io(format!("fsync {}", last.display())));
        }
        let mut dirs = std::collections::BTreeSet::new();
        for p in written {
            if !files_synced && let Ok(f) = File::open(p) {
                f.sync_data()
                    .map_err(io(format!("fsync {}", p.display())))?;
            }
            if let Some(d) = p.parent() {
                dirs.insert(d.to_path_buf());
            }
        }
        for d in dirs {
            if let Ok(f) = File::open(&d) {
                f.sync_all().map_err(io(format!("fsync {}", d.display())))?;
            }
        }
        Ok(())
    }

    /// Where the ledger keeps a spare inode for its next ref lock (outside `refs/`, so git never
    /// reads it as a ref).
    pub(crate) fn spare_path(&self) -> PathBuf {
        self.forum_dir()
            .join("spare")
            .join(self.name.replace('/', "%2F"))
    }

    /// Compare-and-swap the ref from `expected` to `new`, with a reflog line, under git's
    /// lock-file protocol: `NAME.lock` is taken exclusively, the current value is checked, the
    /// reflog line appended and the lock renamed over the ref.
    ///
    /// The ref's files are recycled: the inode the rename replaces is kept (hard-linked) as the
    /// spare, and the next update writes its value into the spare and moves it in as the lock
    /// (a rename with `RENAME_NOREPLACE`, or where that is unsupported a link, which fails
    /// when the name exists, as an exclusive create does). An append therefore
    /// neither allocates nor frees an inode for its ref. That matters on ext4: freeing an inode
    /// with data in a rename makes the kernel write the replacement out at once, and without a
    /// journal every later file creation scans past the inodes freed in the last minute.
    pub(crate) fn cas(
        &self,
        held: &File,
        expected: Option<ObjectId>,
        new: ObjectId,
        message: &str,
    ) -> Result<CasOutcome, StoreError> {
        if self.refs_via_git {
            return self.cas_via_git(expected, new, message);
        }
        let path = self.ref_path();
        let lock = PathBuf::from(format!("{}.lock", path.display()));
        let value = format!("{new}\n");
        let spare = self.spare_path();
        // Say which ref lock we are about to take, in the writer-lock file we hold: if we die
        // holding it, the next writer (who then holds the writer lock) knows the lock is ours
        // and its holder gone. A ref lock without such a note belongs to someone else.
        // What an earlier writer noted: a lock found below with that value is its, left behind.
        let noted = read_intent(held, self.hash);
        note_intent(held, Some(&new));
        failpoint("cas-start");
        match take_lock_from_spare(&spare, &lock, value.as_bytes()) {
            Ok(true) => {}
            Ok(false) => {
                match create_in_dir(&lock, || {
                    OpenOptions::new().write(true).create_new(true).open(&lock)
                }) {
                    Ok(mut f) => f
                        .write_all(value.as_bytes())
                        .map_err(io(format!("writing {}", lock.display())))
                        .inspect_err(|_| {
                            let _ = fs::remove_file(&lock);
                        })?,
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        return Ok(CasOutcome::Locked(lock, noted));
                    }
                    Err(e) => return Err(io(format!("creating {}", lock.display()))(e)),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Ok(CasOutcome::Locked(lock, noted));
            }
            Err(e) => return Err(io(format!("creating {}", lock.display()))(e)),
        }
        // We hold the lock: nobody else moves the ref until it is renamed or removed.
        let release = |outcome: Result<CasOutcome, StoreError>| {
            // The lock's inode becomes the spare again; failing that, it is removed.
            if fs::rename(&lock, &spare).is_err() {
                let _ = fs::remove_file(&lock);
            }
            outcome
        };
        let current = match self.tip_id() {
            Ok(c) => c,
            Err(e) => return release(Err(e)),
        };
        if current != expected {
            return release(Ok(CasOutcome::Conflict));
        }
        failpoint("cas-locked");
        if let Err(e) = self.append_reflog_line(expected, new, message) {
            return release(Err(e));
        }
        failpoint("cas-reflog");
        if expected.is_some() {
            // Keep the inode the rename replaces (a packed-only ref has none). A spare left in
            // place (taking the lock did not use it) is replaced.
            let keep = || match fs::hard_link(&path, &spare) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    fs::remove_file(&spare)?;
                    fs::hard_link(&path, &spare)
                }
                other => other,
            };
            let _ = create_in_dir(&spare, keep);
        }
        if let Err(e) = fs::rename(&lock, &path) {
            return release(Err(io(format!("renaming {} into place", lock.display()))(
                e,
            )));
        }
        note_intent(held, None);
        failpoint("cas-moved");
        Ok(CasOutcome::Moved)
    }

    /// Appends one line to the ref's reflog in git's format, creating the log if needed.
    fn append_reflog_line(
        &self,
        old: Option<ObjectId>,
        new: ObjectId,
        message: &str,
    ) -> Result<(), StoreError> {
        let path = self.reflog_path();
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let old = old.unwrap_or_else(|| ObjectId::null(self.hash));
        let message = one_line(message, "");
        let line = format!("{old} {new} {COMMITTER} {secs} +0000\t{message}\n");
        create_in_dir(&path, || {
            OpenOptions::new().create(true).append(true).open(&path)
        })
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(io(format!("appending to {}", path.display())))
    }

    /// Removes a ref lock whose holder is provably gone, and returns true; returns false (and
    /// leaves the lock alone) otherwise. The caller holds the ledger's writer lock, so no live
    /// git-forum writer holds a ref lock of this ledger. Gone means either: the lock holds the
    /// value a git-forum writer noted in the writer-lock file before taking it (that writer
    /// died holding it: the kernel gave its writer lock to us), or the lock is older than this
    /// boot of the machine. A lock any other process took (`git update-ref`, a transaction
    /// held open by `git update-ref --stdin`) is never broken, however old.
    pub(crate) fn recover_stale_lock(
        &self,
        lock: &Path,
        held: &File,
        noted: Option<ObjectId>,
    ) -> bool {
        let Ok(mut f) = File::open(lock) else {
            // Gone already.
            return true;
        };
        let mut content = Vec::new();
        let _ = (&mut f).take(256).read_to_end(&mut content);
        let content = String::from_utf8_lossy(&content).trim().to_string();
        let value = ObjectId::from_hex(content.as_bytes()).ok();
        let ours = value.is_some() && value == noted;
        let before_boot = f
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .zip(boot_time())
            .is_some_and(|(m, boot)| m < boot);
        if !(ours || before_boot) {
            return false;
        }
        // Keep a record: the dead writer may have written its reflog line before it died,
        // and verify uses this record to tell that line from a tampered ref.
        let path = self.recovered_path();
        if let Some(dir) = path.parent() {
            let _ = fs::create_dir_all(dir);
        }
        if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(&path) {
            let _ = writeln!(f, "{} {}", content, lock.display());
        }
        let _ = fs::remove_file(lock);
        note_intent(held, None);
        true
    }

    /// Settles an append that a killed writer left half done: when the ledger's ref lock is
    /// there and its holder is provably gone (see [`recover_stale_lock`](Self::recover_stale_lock)),
    /// the update is rolled back (the lock removed and recorded, so its reflog line is known
    /// for what it is). Readers call it before they judge the reflog, so a crash never reads as
    /// tampering. Waits for a live git-forum writer to finish; a lock someone else holds is
    /// left alone.
    pub fn settle_interrupted_append(&self) -> Result<(), StoreError> {
        if self.refs_via_git {
            return Ok(());
        }
        let lock = PathBuf::from(format!("{}.lock", self.ref_path().display()));
        if !lock.exists() {
            return Ok(());
        }
        // A reader that cannot take the writer lock (a read-only repository, a server hook's
        // quarantine) leaves the lock alone; verify still knows its reflog line for what it is.
        let Ok(held) = self.writer_lock() else {
            return Ok(());
        };
        let noted = read_intent(&held, self.hash);
        self.recover_stale_lock(&lock, &held, noted);
        Ok(())
    }

    /// The value a ref lock holds when it exists (an update under way, or left by a process
    /// that died), for readers that must not mistake its reflog line for tampering.
    pub(crate) fn pending_ref_lock(&self) -> Option<ObjectId> {
        if self.refs_via_git {
            return None;
        }
        let lock = PathBuf::from(format!("{}.lock", self.ref_path().display()));
        let f = File::open(lock).ok()?;
        let mut content = Vec::new();
        f.take(256).read_to_end(&mut content).ok()?;
        ObjectId::from_hex(String::from_utf8_lossy(&content).trim().as_bytes()).ok()
    }

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

    /// Writes again any of `objs` the object store no longer has.
    fn rewrite_missing(&self, objs: &[Obj]) -> Result<(), StoreError> {
        let mut missing = Vec::new();
        for o in objs {
            let hex = o.id.to_hex().to_string();
            let loose = self.objects_dir().join(&hex[..2]).join(&hex[2..]);
            // access(2), not stat(2): an append never reads the times of files it made (see
            // README: reading them makes the kernel stamp later changes finely).
            if rustix::fs::access(&loose, rustix::fs::Access::EXISTS).is_ok()
                || self.repo.has_object(o.id)
            {
                continue;
            }
            missing.push(o.clone());
        }
        if missing.is_empty() {
            return Ok(());
        }
        self.write_loose_objects(&missing, self.opts.fsync, true)
            .map(|_| ())
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

    /// Flushes everything to disk (for writers that ran with `--no-fsync`) and empties the
    /// ledger's write-ahead log.
    pub fn sync(&self) -> Result<(), StoreError> {
        if self.wal_path().exists() {
            let _lock = self.writer_lock()?;
            self.checkpoint_wal_forced()
        } else {
            self.flush_repository()
        }
    }

    /// Flushes the whole repository's filesystem (Linux `syncfs`; elsewhere the git directory).
    pub(crate) fn flush_repository(&self) -> Result<(), StoreError> {
        let f =
            File::open(&self.common_dir).map_err(io("opening the git directory to flush it"))?;
        f.sync_all().map_err(io("flushing the git directory"))?;
        #[cfg(target_os = "linux")]
        rustix::fs::syncfs(&f)
            .map_err(|e| io("flushing the repository to disk (syncfs)")(e.into()))?;
        Ok(())
    }

    // ----- checkpoints recorded locally -----

    fn checkpoints_path(&self) -> PathBuf {
        self.forum_dir()
            .join("checkpoints")
            .join(format!("{}.jsonl", self.name))
    }

    /// Records `(size, root)` as a witness that later verifies compare against.
    pub fn record_checkpoint(&self, size: u64, root: &str) -> Result<(), StoreError> {
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

    fn recovered_path(&self) -> PathBuf {
        self.forum_dir()
            .join("recovered")
            .join(format!("{}.log", self.name))
    }

    /// The ref values of stale ref locks this ledger's writers removed (each the new value of an
    /// update whose writer died before moving the ref).
    pub fn recovered_locks(&self) -> HashSet<ObjectId> {
        let Ok(text) = fs::read_to_string(self.recovered_path()) else {
            return HashSet::new();
        };
        text.lines()
            .filter_map(|l| l.split(' ').next())
            .filter_map(|h| ObjectId::from_hex(h.as_bytes()).ok())
            .collect()
    }

    /// Checkpoints recorded for this ledger, oldest first.
    pub fn recorded_checkpoints(&self) -> Vec<(u64, String)> {
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
    pub fn reflog(&self) -> Vec<ReflogLine> {
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
pub struct ReflogLine {
    pub old: Option<ObjectId>,
    pub new: Option<ObjectId>,
    /// The line records a sanctioned rewrite (a redaction), after which older lines describe a
    /// chain that no longer exists.
    pub rewrite: bool,
}

struct Built {
    objects: Vec<Obj>,
    commits: Vec<ObjectId>,
    entries: Vec<Entry>,
    as_pack: bool,
}

/// Takes the ref lock `lock` by writing `value` into the spare inode and moving it in. Returns
/// false when there is no usable spare (the caller then creates the lock); an `AlreadyExists`
/// error means the lock is held. A spare with another link is the live ref (a writer died
/// between keeping it and the rename), so it is dropped, never written.
fn take_lock_from_spare(spare: &Path, lock: &Path, value: &[u8]) -> std::io::Result<bool> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt as _;
        let f = match OpenOptions::new().write(true).open(spare) {
            Ok(f) => f,
            Err(_) => return Ok(false),
        };
        // Same length as the value it held (one object id and a newline): overwriting in place
        // frees and allocates nothing. Writing also refreshes the mtime that tells a stale lock.
        let written = file_links_and_len(&f).and_then(|(is_file, nlink, len)| {
            if !is_file || nlink != 1 {
                return Err(std::io::ErrorKind::InvalidData.into());
            }
            f.write_all_at(value, 0)?;
            if len != value.len() as u64 {
                f.set_len(value.len() as u64)?;
            }
            Ok(())
        });
        drop(f);
        if written.is_err() {
            let _ = fs::remove_file(spare);
            return Ok(false);
        }
        // Moved in as the lock, unless a lock is there: one directory change per directory.
        #[cfg(target_os = "linux")]
        {
            use rustix::fs::{CWD, RenameFlags, renameat_with};
            match renameat_with(CWD, spare, CWD, lock, RenameFlags::NOREPLACE) {
                Ok(()) => return Ok(true),
                Err(rustix::io::Errno::EXIST) => {
                    return Err(std::io::ErrorKind::AlreadyExists.into());
                }
                // Not supported by this filesystem: link, then unlink.
                Err(_) => {}
            }
        }
        match fs::hard_link(spare, lock) {
            Ok(()) => {
                let _ = fs::remove_file(spare);
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(e),
            // No hard links here (or another filesystem): create the lock instead.
            Err(_) => Ok(false),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (spare, lock, value);
        Ok(false)
    }
}

/// Whether `f` is a regular file, its link count and its length, asking for nothing more: a
/// stat that asks for the file's times marks them as read, and the kernel (Linux 6.13 on,
/// multigrain timestamps) then stamps the file's next change with a fresh fine-grained time.
/// That moves the clock every other file's next change reads, so the write-ahead log's own
/// mtime would change, and its inode need writing, on every append.
#[cfg(unix)]
fn file_links_and_len(f: &File) -> std::io::Result<(bool, u64, u64)> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{AtFlags, FileType, StatxFlags, statx};
        let st = statx(
            f,
            "",
            AtFlags::EMPTY_PATH,
            StatxFlags::TYPE | StatxFlags::NLINK | StatxFlags::SIZE,
        )?;
        Ok((
            FileType::from_raw_mode(st.stx_mode.into()) == FileType::RegularFile,
            st.stx_nlink.into(),
            st.stx_size,
        ))
    }
    #[cfg(not(target_os = "linux"))]
    {
        use std::os::unix::fs::MetadataExt as _;
        let meta = f.metadata()?;
        Ok((meta.is_file(), meta.nlink(), meta.len()))
    }
}

/// Reads a small file whole without asking for its metadata (`fs::read` sizes its buffer with
/// a full stat; see [`file_links_and_len`] for why the files an append changes avoid one).
fn read_without_stat(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut f = File::open(path)?;
    let mut out = Vec::with_capacity(128);
    let mut buf = [0u8; 256];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

pub(crate) enum CasOutcome {
    Moved,
    Conflict,
    /// The ref lock exists; with the value a git-forum writer had noted before this attempt.
    Locked(PathBuf, Option<ObjectId>),
    /// git's own ref storage was busy (another transaction held its lock): retry.
    Busy,
    /// git refused to point the ref at a commit it no longer has (a racing prune deleted it):
    /// write the objects again and retry.
    ObjectsMissing,
}

pub(crate) fn object(hash: HashKind, kind: Kind, data: Vec<u8>) -> Result<Obj, StoreError> {
    let id =
        gix::objs::compute_hash(hash, kind, &data).map_err(|e| git_err("hashing an object", e))?;
    Ok(Obj { id, kind, data })
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

struct IndexView {
    path: PathBuf,
    width: usize,
    count: u64,
}

impl IndexView {
    fn get(&self, seq: u64) -> Option<ObjectId> {
        if seq >= self.count {
            return None;
        }
        let mut f = File::open(&self.path).ok()?;
        f.seek(SeekFrom::Start(seq * self.width as u64)).ok()?;
        let mut b = vec![0u8; self.width];
        f.read_exact(&mut b).ok()?;
        Some(ObjectId::from_bytes_or_panic(&b))
    }
}

/// The ids as the index stores them: raw bytes, one after another.
fn id_bytes(ids: &[ObjectId]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(ids.iter().map(|id| id.as_slice().len()).sum());
    for id in ids {
        bytes.extend_from_slice(id.as_slice());
    }
    bytes
}

/// Reads `buf.len()` bytes at `offset` without moving the file position.
fn read_exact_at(f: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(f, buf, offset)
    }
    #[cfg(not(unix))]
    {
        let mut f = f;
        f.seek(SeekFrom::Start(offset))?;
        f.read_exact(buf)
    }
}

/// This process's id, asked of the kernel once.
fn pid() -> u32 {
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PID.get_or_init(std::process::id)
}

/// Runs `f` with this thread's level-1 libdeflate compressor (whole-buffer compression, about
/// twice as fast as a stream; made once per thread, as setting one up costs more than
/// compressing a small object).
pub(crate) fn with_fast_compressor<R>(f: impl FnOnce(&mut libdeflater::Compressor) -> R) -> R {
    thread_local! {
        static FAST: std::cell::RefCell<libdeflater::Compressor> = std::cell::RefCell::new(
            libdeflater::Compressor::new(
                libdeflater::CompressionLvl::new(1).expect("level 1 is valid"),
            ),
        );
    }
    FAST.with(|c| f(&mut c.borrow_mut()))
}

/// How a new loose object waits for its name: a temporary file to rename, or an anonymous
/// file to link in (through this path to its descriptor).
enum Staged {
    Named(PathBuf),
    Anon(PathBuf),
}

/// An anonymous file (`O_TMPFILE`) in an object directory, linked in under its name once
/// written. A reader never sees it half written, a writer killed before the link leaves
/// nothing behind, and it changes the directory once (a temporary file and a rename change it
/// twice). Linux only; `create` returns `None` where the filesystem or `/proc` lacks support
/// or the file cannot be made, and the caller falls back to a temporary file (whose error, if
/// it fails too, names the file).
struct AnonObject {
    file: File,
    /// `/proc/self/fd/N`: linking it with `AT_SYMLINK_FOLLOW` names the anonymous file (the
    /// `AT_EMPTY_PATH` form needs a capability ordinary users lack).
    link_source: PathBuf,
}

impl AnonObject {
    #[cfg(target_os = "linux")]
    fn create(dir: &Path) -> Option<AnonObject> {
        use rustix::fs::{CWD, Mode, OFlags, openat};
        use rustix::io::Errno;
        use std::sync::atomic::{AtomicBool, Ordering};
        // Cleared the first time the filesystem or /proc says no; later objects go straight to
        // the temporary-file path.
        static SUPPORTED: AtomicBool = AtomicBool::new(true);
        static PROC: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if !SUPPORTED.load(Ordering::Relaxed)
            || !*PROC.get_or_init(|| Path::new("/proc/self/fd").is_dir())
        {
            return None;
        }
        let open = || {
            openat(
                CWD,
                dir,
                OFlags::WRONLY | OFlags::TMPFILE | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o444),
            )
        };
        let fd = match open() {
            Ok(fd) => fd,
            Err(Errno::NOENT) => {
                match fs::create_dir(dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(_) => return None,
                }
                match open() {
                    Ok(fd) => fd,
                    Err(_) => return None,
                }
            }
            Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL | Errno::NOSYS) => {
                SUPPORTED.store(false, Ordering::Relaxed);
                return None;
            }
            // Anything else (a permission, a full disk): the temporary-file path tries too, and
            // its error names the file it could not create.
            Err(_) => return None,
        };
        let file = File::from(fd);
        let link_source = PathBuf::from(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&file)
        ));
        Some(AnonObject { file, link_source })
    }

    #[cfg(not(target_os = "linux"))]
    fn create(_dir: &Path) -> Option<AnonObject> {
        None
    }
}

/// `linkat(source, dest, AT_SYMLINK_FOLLOW)`: names the file `source` refers to.
#[cfg(target_os = "linux")]
fn fs_link_follow(source: &Path, dest: &Path) -> std::io::Result<()> {
    use rustix::fs::{AtFlags, CWD, linkat};
    linkat(CWD, source, CWD, dest, AtFlags::SYMLINK_FOLLOW).map_err(Into::into)
}

#[cfg(not(target_os = "linux"))]
fn fs_link_follow(_source: &Path, _dest: &Path) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Runs `op`, which creates something at `path`; when the parent directory is missing, creates
/// it and runs `op` once more. The common case (the directory exists) costs no extra call.
fn create_in_dir<T>(path: &Path, mut op: impl FnMut() -> std::io::Result<T>) -> std::io::Result<T> {
    match op() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                fs::create_dir_all(dir)?;
            }
            op()
        }
        other => other,
    }
}

fn unique() -> u128 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    nanos ^ ((N.fetch_add(1, Ordering::Relaxed) as u128) << 64) ^ pid() as u128
}

/// Where a writer notes the ref lock it is taking, in its writer-lock file: after the write-ahead
/// log's hint (the first 128 bytes).
const INTENT_AT: u64 = 128;

/// Notes (or, with `None`, clears) the value of the ref lock this writer is about to take.
fn note_intent(held: &File, value: Option<&ObjectId>) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        let mut line = [b' '; 65];
        if let Some(v) = value {
            let hex = v.to_hex().to_string();
            line[..hex.len()].copy_from_slice(hex.as_bytes());
        }
        line[64] = b'\n';
        let _ = held.write_all_at(&line, INTENT_AT);
    }
    #[cfg(not(unix))]
    let _ = (held, value);
}

/// The value a git-forum writer noted before taking a ref lock, if any.
pub(crate) fn read_intent(held: &File, hash: HashKind) -> Option<ObjectId> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        let mut line = [0u8; 65];
        let n = held.read_at(&mut line, INTENT_AT).ok()?;
        let text = String::from_utf8_lossy(&line[..n]);
        ObjectId::from_hex(text.trim().as_bytes())
            .ok()
            .filter(|id| id.kind() == hash)
    }
    #[cfg(not(unix))]
    {
        let _ = (held, hash);
        None
    }
}

/// When this machine booted (Linux: `btime` in `/proc/stat`); a lock file older than that was
/// left by a process that is gone.
fn boot_time() -> Option<std::time::SystemTime> {
    let text = fs::read_to_string("/proc/stat").ok()?;
    let secs: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(std::time::UNIX_EPOCH + Duration::from_secs(secs))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loose_objects_appear_whole_and_writing_them_again_is_harmless() {
        let dir = tempfile::tempdir().unwrap();
        // Runs git in the repository and insists that it succeeds.
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args(args)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        git(&["init", "-q"]);
        let store = GitStore::open(dir.path(), "main", Options::default()).unwrap();
        let hash = store.object_hash();
        let blob = object(hash, Kind::Blob, b"{\"a\":1}".to_vec()).unwrap();
        let tree = object(hash, Kind::Tree, tree_bytes(&blob.id)).unwrap();
        let commit = object(
            hash,
            Kind::Commit,
            format!(
                "tree {}\nauthor a <a@b> 1 +0000\ncommitter a <a@b> 1 +0000\n\nx\n",
                tree.id
            )
            .into_bytes(),
        )
        .unwrap();
        let objs = [blob, tree, commit];
        let first = store.write_loose_objects(&objs, false, false).unwrap();
        assert_eq!(first.len(), 3);
        // Again: the blob and tree are skipped as present, the commit is written without
        // asking and finds its name taken, which is success.
        let again = store.write_loose_objects(&objs, false, false).unwrap();
        assert_eq!(again.len(), 1);
        // Replacing (what recovery does with a damaged file) renames over the old one.
        std::fs::write(&first[2], b"damaged").unwrap_or_else(|_| {
            let mut p = std::fs::metadata(&first[2]).unwrap().permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            p.set_readonly(false);
            std::fs::set_permissions(&first[2], p).unwrap();
            std::fs::write(&first[2], b"damaged").unwrap();
        });
        store.write_loose_objects(&objs[2..], false, true).unwrap();
        git(&["fsck", "--strict", "--no-dangling"]);
        for o in &objs {
            git(&["cat-file", "-e", &o.id.to_string()]);
        }
        // Nothing temporary is left beside the objects.
        for d in std::fs::read_dir(store.objects_dir()).unwrap() {
            let d = d.unwrap().path();
            let name = d.file_name().unwrap().to_string_lossy().into_owned();
            assert!(!name.starts_with("forum_tmp_"), "{}", d.display());
            if d.is_dir() {
                for f in std::fs::read_dir(&d).unwrap() {
                    let name = f.unwrap().file_name().to_string_lossy().into_owned();
                    assert!(!name.starts_with("tmp_obj_"), "{}/{name}", d.display());
                }
            }
        }
    }
}
