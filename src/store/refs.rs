//! Reading and moving the ledger ref: the outcome of a compare-and-swap, the ref read from its
//! loose file (or packed), and, below, refs kept by git's own ref storage.
//!
//! git forum moves a ledger ref with a fast path of its own (`GitStore::cas`: git's lock-file
//! protocol on `refs/forum/ledgers/NAME`, with a reflog line). That is exactly what git does,
//! but only in a repository whose refs are files. A reftable repository (`git init
//! --ref-format=reftable`), or any other backend git may add, keeps refs where a loose file is
//! invisible: git would not see the ledger, and `git gc --prune=now` would delete its objects.
//! There every ref read and write goes through `git` itself: `git rev-parse` to read,
//! `git update-ref` (old value as the compare-and-swap, `--create-reflog`) to move, and
//! `git reflog` to read the reflog. gix cannot read or write reftable, so spawning git is the
//! only correct way; it costs a few milliseconds per append on such repositories only.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use gix::ObjectId;

use super::error::{StoreError, io};
use super::failpoint::failpoint;
use super::handle::{GitStore, ReflogLine};
pub(crate) use super::handle::{RefStorage, SeenTip};

/// `git --git-dir DIR` under git forum's one environment policy (see [`crate::gitproc`]).
pub(crate) fn git_at(git_dir: &Path) -> Command {
    crate::gitproc::at_git_dir(git_dir)
}

/// Runs `git --git-dir DIR ARGS...` and fails with git's first line of complaint.
pub(crate) fn git_ok(git_dir: &Path, args: &[&str]) -> Result<(), StoreError> {
    let what = args.iter().take(2).copied().collect::<Vec<_>>().join(" ");
    let mut c = git_at(git_dir);
    c.args(args);
    let o = crate::gitproc::output(c, None, crate::gitproc::OUTPUT_LIMIT)?;
    if o.status.success() {
        return Ok(());
    }
    Err(StoreError::Git(format!(
        "git {what} failed: {}",
        first_line(&o.stderr)
    )))
}

/// Runs `cmd` to the end, its output read up to git forum's bound.
fn bounded(cmd: Command) -> Result<std::process::Output, StoreError> {
    Ok(crate::gitproc::output(
        cmd,
        None,
        crate::gitproc::OUTPUT_LIMIT,
    )?)
}

fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

/// What one compare-and-swap of the ledger ref did.
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

/// Whether `f` is a regular file, its link count and its length, asking for nothing more: a
/// stat that asks for the file's times marks them as read, and the kernel (Linux 6.13 on,
/// multigrain timestamps) then stamps the file's next change with a fresh fine-grained time.
/// That moves the clock every other file's next change reads, so the write-ahead log's own
/// mtime would change, and its inode need writing, on every append.
#[cfg(unix)]
pub(super) fn file_links_and_len(f: &File) -> std::io::Result<(bool, u64, u64)> {
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
pub(super) fn read_without_stat(path: &Path) -> std::io::Result<Vec<u8>> {
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

impl GitStore {
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

    fn git(&self) -> Command {
        git_at(self.common_dir())
    }

    /// The ref's target through git, asking git only when the ref storage may have changed
    /// since this handle last asked. A reftable stack is a list of immutable tables named in
    /// `reftable/tables.list`, and every ref update or compaction writes a list naming a new
    /// table: while the list reads exactly as it did, every ref is what git said then. The list
    /// is read before git is asked, so a move landing in between makes the next read ask again.
    /// Any other storage asks git every time. Without this a reader spawned git once per entry
    /// it read (73 times for `git forum runs` after one run).
    pub(crate) fn tip_id_via_git(&self) -> Result<Option<ObjectId>, StoreError> {
        let manifest = std::fs::read(self.common_dir().join("reftable").join("tables.list")).ok();
        let mut seen = self.tip_via_git.lock().unwrap_or_else(|e| e.into_inner());
        if let (Some(now), Some(before)) = (&manifest, seen.as_ref())
            && *now == before.manifest
        {
            return Ok(before.tip);
        }
        let tip = self.ask_git_for_tip()?;
        *seen = manifest.map(|manifest| SeenTip { manifest, tip });
        Ok(tip)
    }

    /// The ref's target through `git rev-parse` (which does not need the object to exist, so a
    /// ref naming a pruned commit is still seen and reported as such).
    fn ask_git_for_tip(&self) -> Result<Option<ObjectId>, StoreError> {
        let mut cmd = self.git();
        cmd.args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
            .arg(self.refname());
        let o = bounded(cmd)?;
        if !o.status.success() {
            if o.stderr.is_empty() {
                return Ok(None);
            }
            return Err(StoreError::Git(format!(
                "cannot read ledger ref {}: {}",
                self.refname(),
                first_line(&o.stderr)
            )));
        }
        let text = first_line(&o.stdout);
        ObjectId::from_hex(text.as_bytes())
            .ok()
            .filter(|id| id.kind() == self.object_hash())
            .map(Some)
            .ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "ledger ref {} does not name an object ({text:?}); see `git reflog show {}`",
                    self.refname(),
                    self.refname()
                ))
            })
    }

    /// The lock git takes on the whole reftable stack for every ref update and compaction.
    pub(crate) fn stack_lock_path(&self) -> std::path::PathBuf {
        self.common_dir().join("reftable").join("tables.list.lock")
    }

    /// Compare-and-swap through `git update-ref REF NEW OLD` (one ref transaction in git's own
    /// storage, with a reflog line). A refused update is a conflict when the ref moved, and a
    /// busy lock when it did not.
    pub(crate) fn cas_via_git(
        &self,
        held: &File,
        expected: Option<ObjectId>,
        new: ObjectId,
        message: &str,
    ) -> Result<CasOutcome, StoreError> {
        let old = expected.unwrap_or_else(|| ObjectId::null(self.object_hash()));
        let mut cmd = self.git();
        if self.options().fsync {
            // Make the ref storage durable before git returns.
            cmd.args(["-c", "core.fsync=reference"]);
        }
        let message = message.replace(['\n', '\r'], " ");
        failpoint("cas-start");
        cmd.args([
            "update-ref",
            "--create-reflog",
            "-m",
            &message,
            "--end-of-options",
        ])
        .arg(self.refname())
        .arg(new.to_string())
        .arg(old.to_string());
        // git gets the writer lock as its standard input (which `update-ref` never reads): the
        // same open file description, and a `flock` lock lasts until every descriptor of it is
        // closed. git moves a ref it keeps itself in its own process, so a writer killed while
        // its `git update-ref` runs would otherwise free the lock while that update is still
        // landing, and the next writer could read the ref before it and the reflog after it
        // (a ledger being created then looks deleted).
        let lock = held
            .try_clone()
            .map_err(io("sharing the writer lock with git update-ref".to_string()))?;
        let o = crate::gitproc::output_with_stdin(cmd, lock.into(), crate::gitproc::OUTPUT_LIMIT)?;
        if o.status.success() {
            failpoint("cas-moved");
            return Ok(CasOutcome::Moved);
        }
        let why = first_line(&o.stderr);
        if why.contains("nonexistent object") {
            // A prune deleted the new commit before git could point the ref at it.
            return Ok(CasOutcome::ObjectsMissing);
        }
        if self.tip_id_via_git()? != expected {
            return Ok(CasOutcome::Conflict);
        }
        if why.contains("cannot lock") || why.contains("Unable to create") || why.contains("lock") {
            // Say which lock: git's reftable stack lock when it is there (a git killed while it
            // held it leaves it behind), else the ref's own.
            let stack = self.stack_lock_path();
            if stack.exists() {
                return Ok(CasOutcome::Locked(stack, None));
            }
            let loose = self.common_dir().join(format!("{}.lock", self.refname()));
            if loose.exists() {
                return Ok(CasOutcome::Locked(loose, None));
            }
            return Ok(CasOutcome::Busy);
        }
        Err(StoreError::Git(format!(
            "git update-ref {} refused the append: {why}",
            self.refname()
        )))
    }

    /// The ref's reflog through `git reflog`, oldest first. git prints each line's new value;
    /// a line's old value is the new value of the line before it (the null id for the first).
    /// A reflog git cannot show (one naming a pruned commit) reads as empty: verify then reports
    /// the missing object itself.
    pub(crate) fn reflog_via_git(&self) -> Vec<ReflogLine> {
        let mut cmd = self.git();
        cmd.args([
            "reflog",
            "show",
            "--no-abbrev",
            "--format=%H %gs",
            "--end-of-options",
        ])
        .arg(self.refname())
        .arg("--");
        let Ok(o) = bounded(cmd) else {
            return Vec::new();
        };
        if !o.status.success() {
            return Vec::new();
        }
        let text = String::from_utf8_lossy(&o.stdout);
        let mut lines: Vec<(Option<ObjectId>, bool)> = text
            .lines()
            .map(|l| {
                let (id, msg) = l.split_once(' ').unwrap_or((l, ""));
                (
                    ObjectId::from_hex(id.as_bytes()).ok(),
                    msg.starts_with("forum: rewrite"),
                )
            })
            .collect();
        lines.reverse();
        let mut out = Vec::with_capacity(lines.len());
        let mut prev = Some(ObjectId::null(self.object_hash()));
        for (new, rewrite) in lines {
            out.push(ReflogLine {
                old: prev,
                new,
                rewrite,
            });
            prev = new;
        }
        out
    }
}
