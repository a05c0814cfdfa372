//! Reading git objects (with the write-ahead log as the fallback for one a prune took), and
//! writing loose objects: each compressed object file appears whole under its name (an
//! anonymous file linked in, or a temporary file renamed), durable as the flush method asks.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use gix::ObjectId;
use gix::objs::Kind;

use super::durable::start_writeback;
use super::error::{StoreError, io};
use super::handle::GitStore;
use super::pack::Obj;

/// This process's id, asked of the kernel once.
fn pid() -> u32 {
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PID.get_or_init(std::process::id)
}

/// Runs `f` with a level-1 libdeflate compressor (whole-buffer compression, about twice as
/// fast as a stream). Compressors are kept in one pool for the process rather than one per
/// thread: setting one up costs more than compressing a small object, and a run's tasks each
/// append from a thread of their own, which would otherwise fault in a fresh compressor's
/// tables every time.
pub(crate) fn with_fast_compressor<R>(f: impl FnOnce(&mut libdeflater::Compressor) -> R) -> R {
    static POOL: std::sync::Mutex<Vec<libdeflater::Compressor>> = std::sync::Mutex::new(Vec::new());
    let taken = POOL.lock().unwrap_or_else(|e| e.into_inner()).pop();
    let mut c = taken.unwrap_or_else(|| {
        libdeflater::Compressor::new(libdeflater::CompressionLvl::new(1).expect("level 1 is valid"))
    });
    let r = f(&mut c);
    POOL.lock().unwrap_or_else(|e| e.into_inner()).push(c);
    r
}

/// Runs `f` with this thread's level-0 libdeflate compressor: stored blocks, no match finder.
fn with_stored_compressor<R>(f: impl FnOnce(&mut libdeflater::Compressor) -> R) -> R {
    thread_local! {
        static STORED: std::cell::RefCell<libdeflater::Compressor> = std::cell::RefCell::new(
            libdeflater::Compressor::new(
                libdeflater::CompressionLvl::new(0).expect("level 0 is valid"),
            ),
        );
    }
    STORED.with(|c| f(&mut c.borrow_mut()))
}

/// A loose object of at most this many bytes (header and content) is stored uncompressed in
/// its zlib stream (2 bytes of header, 5 of block header, 4 of checksum): its file then still
/// fits in one 4 KiB block, the least a file takes on ext4 or in tmpfs, so deflate could save
/// no space, and each deflate call sets up a 128 KiB match finder, which cost more than the
/// rest of writing a small object. git reads either (`core.looseCompression=0` writes the same);
/// a pack written later compresses the object afresh.
const STORE_LOOSE_UP_TO: usize = 4096 - 11;

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
        Some(AnonObject::of(File::from(fd)))
    }

    /// The anonymous file `file` made by [`create`](Self::create), with its link source.
    fn of(file: File) -> AnonObject {
        let link_source = PathBuf::from(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&file)
        ));
        AnonObject { file, link_source }
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
pub(super) fn create_in_dir<T>(
    path: &Path,
    mut op: impl FnMut() -> std::io::Result<T>,
) -> std::io::Result<T> {
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

pub(super) fn unique() -> u128 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    nanos ^ ((N.fetch_add(1, Ordering::Relaxed) as u128) << 64) ^ pid() as u128
}

impl GitStore {
    /// Reads object `id` into `buf`. An object missing from the object store but held by the
    /// write-ahead log (a prune that listed the refs before an append moved its ref deletes
    /// that append's objects afterwards; see `wal/recover.rs`) is read from the log: its id is
    /// the hash of its content, so the copy is exact. [`read_stored`](Self::read_stored) reads
    /// the object store alone. A handle reading its own writes back answers from memory
    /// first ([`read_own_writes_back`](Self::read_own_writes_back)).
    pub(crate) fn read_raw(
        &self,
        id: &ObjectId,
        buf: &mut Vec<u8>,
    ) -> Result<Option<Kind>, StoreError> {
        if let Some(kind) = self.own.read(id, buf) {
            return Ok(Some(kind));
        }
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
            if let Ok(Some(kind)) = super::odb::try_find(&repo, id, buf) {
                return Some(kind);
            }
        }
        None
    }

    /// Keeps, from now on, the objects this handle writes, to be read back from memory once
    /// [`read_own_writes_back`](Self::read_own_writes_back) is called (see `own_writes.rs`).
    pub(crate) fn record_own_writes(&self) {
        self.own.record();
    }

    /// Answers reads of the objects kept since [`record_own_writes`](Self::record_own_writes)
    /// from memory, and keeps no more. For a caller whose writing is over: an append's checks
    /// must see the object store.
    pub(crate) fn read_own_writes_back(&self) {
        self.own.read_back();
    }

    /// Reads object `id` from the object store alone (no write-ahead log).
    pub(crate) fn read_stored(
        &self,
        id: &ObjectId,
        buf: &mut Vec<u8>,
    ) -> Result<Option<Kind>, StoreError> {
        super::odb::try_find(&self.repo, id, buf)
            .map_err(|e| super::error::gix_err(format!("reading object {id}"), e))
    }

    /// The file a new object is written to before it takes its name: an anonymous file in the
    /// fan-out directory `dir`, linked in once written (one directory change instead of two,
    /// see `AnonObject`), or a named temporary file renamed over the old one when replacing.
    fn staging_file(&self, dir: &Path, replace: bool) -> Result<(Staged, File), StoreError> {
        let anon = if replace {
            None
        } else {
            // The file an append made before it took the writer lock, else a new one.
            let ready = self
                .object_file
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            ready
                .map(AnonObject::of)
                .or_else(|| AnonObject::create(dir))
        };
        Ok(match anon {
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
        })
    }

    /// Makes, unless one is waiting already, the anonymous file the next new loose object is
    /// written to. An append calls this before it takes the writer lock: creating a file is
    /// the slowest step of writing an object on some file systems (ext4 searches its inode
    /// table, without a journal past every inode freed in the last minute), and the commit,
    /// which names the tip, can only be written under the lock. The file is made in the object
    /// directory and linked into its fan-out directory once written, which the kernel allows
    /// between any two directories of one file system. Nothing is left behind if it is never
    /// used: an anonymous file disappears with its last descriptor.
    pub(crate) fn ready_object_file(&self) {
        let mut slot = self.object_file.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = AnonObject::create(&self.objects_dir()).map(|a| a.file);
        }
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
            let compress = |c: &mut libdeflater::Compressor| {
                z.resize(c.zlib_compress_bound(raw.len()), 0);
                let n = c.zlib_compress(&raw, &mut z)?;
                z.truncate(n);
                Ok(())
            };
            if raw.len() <= STORE_LOOSE_UP_TO {
                with_stored_compressor(compress)
            } else {
                with_fast_compressor(compress)
            }
            .map_err(|e: libdeflater::CompressionError| {
                io("compressing an object")(std::io::Error::other(e.to_string()))
            })?;
            let (staged_as, mut f) = self.staging_file(&dir, replace)?;
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
            place_staged(staged_as, &path, f)?;
            written.push(path);
        }
        if durable && !method.batch() {
            self.flush(&written, true)?;
        }
        self.own.wrote(objs);
        Ok(written)
    }

    /// Writes again any of `objs` the object store no longer has.
    pub(super) fn rewrite_missing(&self, objs: &[Obj]) -> Result<(), StoreError> {
        let mut missing = Vec::new();
        for o in objs {
            let hex = o.id.to_hex().to_string();
            let loose = self.objects_dir().join(&hex[..2]).join(&hex[2..]);
            // access(2), not stat(2): an append never reads the times of files it made (see
            // README: reading them makes the kernel stamp later changes finely).
            if rustix::fs::access(&loose, rustix::fs::Access::EXISTS).is_ok()
                || super::odb::exists(&self.repo, &o.id)
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
}

/// Gives a written object its name `path`: renames a named temporary file, or links an
/// anonymous one in, making the fan-out directory again when a prune removed it meanwhile.
fn place_staged(staged_as: Staged, path: &Path, f: File) -> Result<(), StoreError> {
    match staged_as {
        Staged::Named(tmp) => {
            drop(f);
            let mut tries = 0;
            while let Err(e) = fs::rename(&tmp, path) {
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
                match fs_link_follow(&source, path) {
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::codec::{object, tree_bytes};
    use crate::store::handle::Options;

    /// Runs git in `dir`, insists that it succeeds, and gives its output.
    fn git_in(dir: &Path, args: &[&str]) -> Vec<u8> {
        let out = crate::gitproc::in_dir(dir).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    #[test]
    fn loose_objects_appear_whole_and_writing_them_again_is_harmless() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| git_in(dir.path(), args);
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

    #[test]
    fn a_loose_object_that_fits_one_block_is_stored_and_a_larger_one_deflated() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| git_in(dir.path(), args);
        git(&["init", "-q"]);
        let store = GitStore::open(dir.path(), "main", Options::default()).unwrap();
        let hash = store.object_hash();
        // The header of a blob of 4,075 bytes is "blob 4075\0": 4,085 bytes in all.
        let at_edge = "a".repeat(4075);
        let past_edge = "b".repeat(4076);
        for (content, stored) in [
            ("{\"a\":1}", true),
            (&at_edge[..], true),
            (&past_edge[..], false),
        ] {
            let blob = object(hash, Kind::Blob, content.as_bytes().to_vec()).unwrap();
            let raw = format!("blob {}\0", content.len()).len() + content.len();
            let written = store
                .write_loose_objects(std::slice::from_ref(&blob), false, false)
                .unwrap();
            let size = std::fs::metadata(&written[0]).unwrap().len() as usize;
            if stored {
                assert_eq!(size, raw + 11, "{} bytes", content.len());
                assert!(size <= 4096);
            } else {
                assert!(size < 100, "{} bytes deflated to {size}", content.len());
            }
            assert_eq!(
                git(&["cat-file", "blob", &blob.id.to_string()]),
                content.as_bytes()
            );
        }
        git(&["fsck", "--strict", "--no-dangling"]);
    }

    #[test]
    fn an_object_file_made_before_the_write_is_the_one_written_and_linked_into_its_fan_out() {
        let dir = tempfile::tempdir().unwrap();
        let out = crate::gitproc::in_dir(dir.path())
            .args(["init", "-q"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let store = GitStore::open(dir.path(), "main", Options::default()).unwrap();
        let blob = object(store.object_hash(), Kind::Blob, b"{\"made\":1}".to_vec()).unwrap();
        store.ready_object_file();
        let ready = store.object_file.lock().unwrap().as_ref().map(|f| {
            use std::os::unix::fs::MetadataExt as _;
            f.metadata().unwrap().ino()
        });
        if cfg!(target_os = "linux") {
            assert!(ready.is_some(), "no anonymous file was made");
        }
        // Asked again, the waiting file is kept, not replaced.
        store.ready_object_file();
        let written = store
            .write_loose_objects(std::slice::from_ref(&blob), false, false)
            .unwrap();
        assert!(
            store.object_file.lock().unwrap().is_none(),
            "the file was used"
        );
        if let Some(ino) = ready {
            use std::os::unix::fs::MetadataExt as _;
            assert_eq!(std::fs::metadata(&written[0]).unwrap().ino(), ino);
        }
        let out = crate::gitproc::in_dir(dir.path())
            .args(["cat-file", "-p", &blob.id.to_string()])
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"{\"made\":1}");
        // Nothing but fan-out directories in the object directory.
        for d in std::fs::read_dir(store.objects_dir()).unwrap() {
            let d = d.unwrap().path();
            assert!(d.is_dir(), "{} is left beside the objects", d.display());
        }
    }
}
