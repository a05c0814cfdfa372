//! The write-ahead log that makes a single durable append cost one flush.
//!
//! An append writes three loose objects and moves a ref. Flushing each of those files (and the
//! directories that gained names) costs several device flushes per append. With the log, an
//! append writes its objects and moves its ref without flushing them, then writes one record
//! holding the old tip, the new tip and the objects' bytes to `.git/forum/wal/NAME.wal` and
//! flushes that file alone. The file is created zero-filled, so that flush rewrites data blocks
//! in place and touches no file-system metadata: at 64 KiB first, so that a new ledger's first
//! append does not write a whole log of zeros, and again at `forum.walSize` (1 MiB by default)
//! the first time it fills. The append returns only after the record is on disk.
//!
//! Appenders in several processes share flushes (group commit; `wal/group.rs` has the
//! protocol and why it is safe). Under the ledger's writer lock an append writes its objects,
//! moves its ref, writes its record (not flushed) and raises the *written* count in the
//! writer-lock file, which gives it a ticket. It then releases the writer lock, so the next
//! appender can go on, and takes the ledger's flush lock (`.git/forum/locks/NAME.flush`, an
//! `flock`). Whoever holds it reads the *durable* count there: when it covers its ticket, an
//! earlier holder's flush covered this record too and it returns; otherwise it reads *written*,
//! flushes the log once (every record up to that count is in it), raises *durable* to it and
//! releases. The appenders that queued behind it meanwhile find themselves covered. No append
//! returns before a flush that began after its record was written; one killed in between was
//! never acknowledged, and what it leaves is what a writer killed after moving its ref leaves.
//!
//! Every process sees the objects and the ref at once (they are in the page cache). What a
//! power loss can take away is only what the page cache had not written yet: after a reboot, the
//! next `git forum` command on the ledger notices that the log was written during an earlier
//! boot, rewrites any logged object that is missing or damaged, puts the ref back on the last
//! logged tip if it was left behind or broken, restores the reflog lines, flushes everything and
//! empties the log. A checkpoint (a full log, a batch or a redaction) flushes the repository
//! and empties the log the same way, zeroing the records so no body outlives a redaction in the
//! log; what the records held is first written into a pack (see `wal/recover.rs`: the log is
//! also the copy of recent appends' objects that a racing `git prune` cannot delete). `git forum
//! sync` flushes and leaves the records where they are.
//!
//! Layout: a 4 KiB block for the header (magic, generation, boot id of the last writer, the tip
//! the last record left, a hint of where the records end, CRC-32), then records:
//! `len: u32 LE, crc: u32 LE, payload`, the CRC covering the payload, whose first 8 bytes are the
//! generation. A record is valid when its CRC matches and it belongs to the current generation;
//! the first invalid one ends the log (a torn record is an append that was never acknowledged).
//! From format 2 on, a record's objects are stored deflated (an entry's body is JSON and shrinks
//! several times), so a log holds several times more appends between checkpoints. A format-1
//! log left by an earlier version is still read, recovered if it needs to be, and replaced.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{Seek as _, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use gix::ObjectId;
use gix::hash::Kind as HashKind;
use gix::objs::Kind;

use super::codec::{AUTHOR_EMAIL, object};
use super::error::StoreError;
use super::handle::GitStore;
use super::objects::with_fast_compressor;
use super::pack::Obj;

const MAGIC: &[u8; 16] = b"git-forum wal 2\n";
/// The header of a format-1 log (objects stored raw), read but no longer written.
const MAGIC_V1: &[u8; 16] = b"git-forum wal 1\n";
/// The largest objects section a record may inflate to (a single append is far smaller).
const MAX_OBJECTS_LEN: usize = 256 << 20;
/// Records start here; the header fills the first block.
pub(crate) const DATA_START: u64 = 4096;
use super::handle::{FIRST_CAPACITY, MIN_CAPACITY};
const HEADER_LEN: usize = 128;

/// One logged append: the ref moved from `old` to `new`, writing `objects`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WalRecord {
    pub(crate) old: Option<ObjectId>,
    pub(crate) new: ObjectId,
    pub(crate) objects: Vec<(Kind, Vec<u8>)>,
}

impl WalRecord {
    pub(crate) fn new(old: Option<ObjectId>, new: ObjectId, objects: &[Obj]) -> WalRecord {
        WalRecord {
            old,
            new,
            objects: objects.iter().map(|o| (o.kind, o.data.clone())).collect(),
        }
    }

    pub(crate) fn encode(&self, generation: u64) -> Vec<u8> {
        let mut p =
            Vec::with_capacity(64 + self.objects.iter().map(|o| o.1.len() + 5).sum::<usize>());
        p.extend_from_slice(&generation.to_le_bytes());
        match self.old {
            Some(old) => {
                p.push(1);
                p.extend_from_slice(old.as_bytes());
            }
            None => p.push(0),
        }
        p.extend_from_slice(self.new.as_bytes());
        let mut objects = Vec::with_capacity(self.objects.iter().map(|o| o.1.len() + 5).sum());
        objects.extend_from_slice(&(self.objects.len() as u32).to_le_bytes());
        for (kind, data) in &self.objects {
            objects.push(kind_code(*kind));
            objects.extend_from_slice(&(data.len() as u32).to_le_bytes());
            objects.extend_from_slice(data);
        }
        let mut z = Vec::new();
        let n = with_fast_compressor(|c| {
            z.resize(c.deflate_compress_bound(objects.len()), 0);
            c.deflate_compress(&objects, &mut z)
                .expect("the buffer holds the compression bound")
        });
        p.extend_from_slice(&(objects.len() as u32).to_le_bytes());
        p.extend_from_slice(&z[..n]);
        let mut out = Vec::with_capacity(8 + p.len());
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&p).to_le_bytes());
        out.extend_from_slice(&p);
        out
    }

    /// Decodes a record payload of log format `version` (CRC already checked). `None` when it
    /// is malformed.
    pub(crate) fn decode(p: &[u8], hash: HashKind, version: u8) -> Option<(u64, WalRecord)> {
        let mut r = Reader { p, at: 0 };
        let generation = u64::from_le_bytes(r.take(8)?.try_into().ok()?);
        let id_len = hash.len_in_bytes();
        let old = match r.take(1)?[0] {
            0 => None,
            1 => Some(ObjectId::try_from(r.take(id_len)?).ok()?),
            _ => return None,
        };
        let new = ObjectId::try_from(r.take(id_len)?).ok()?;
        let inflated;
        if version >= 2 {
            let len = u32::from_le_bytes(r.take(4)?.try_into().ok()?) as usize;
            if len > MAX_OBJECTS_LEN {
                return None;
            }
            let mut out = vec![0u8; len];
            let n = libdeflater::Decompressor::new()
                .deflate_decompress(r.take(p.len() - r.at)?, &mut out)
                .ok()?;
            if n != len {
                return None;
            }
            inflated = out;
            r = Reader {
                p: &inflated,
                at: 0,
            };
        }
        let n = u32::from_le_bytes(r.take(4)?.try_into().ok()?) as usize;
        let mut objects = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            let kind = kind_from_code(r.take(1)?[0])?;
            let len = u32::from_le_bytes(r.take(4)?.try_into().ok()?) as usize;
            objects.push((kind, r.take(len)?.to_vec()));
        }
        (r.at == r.p.len()).then_some((generation, WalRecord { old, new, objects }))
    }
}

struct Reader<'a> {
    p: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.p.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
}

fn kind_code(kind: Kind) -> u8 {
    match kind {
        Kind::Commit => 1,
        Kind::Tree => 2,
        Kind::Blob => 3,
        Kind::Tag => 4,
    }
}

fn kind_from_code(code: u8) -> Option<Kind> {
    Some(match code {
        1 => Kind::Commit,
        2 => Kind::Tree,
        3 => Kind::Blob,
        4 => Kind::Tag,
        _ => return None,
    })
}

/// This boot's id (Linux), so a log written before a reboot, whose unflushed files the page
/// cache may have lost, is told apart from one written since (whose files every process still
/// sees). Empty where unknown: then every open checks the log.
pub(crate) fn boot_id() -> [u8; 36] {
    static ID: std::sync::OnceLock<[u8; 36]> = std::sync::OnceLock::new();
    *ID.get_or_init(|| {
        let mut id = [0u8; 36];
        if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
            let s = s.trim().as_bytes();
            let n = s.len().min(36);
            id[..n].copy_from_slice(&s[..n]);
        }
        id
    })
}

/// The header, as read or about to be written. Only the generation needs to be on disk (it is
/// flushed when it changes); the rest are hints kept current in the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// The log format: 2, or 1 for a log an earlier version wrote.
    pub(crate) version: u8,
    pub(crate) generation: u64,
    /// The boot that last wrote the log.
    pub(crate) boot: [u8; 36],
    /// The tip the log's last record (or, in an empty log, the last checkpoint) left the ref
    /// at. An append whose old tip differs follows writes the log does not cover (a batch, a
    /// redaction, a writer killed between moving the ref and logging, another tool), so it
    /// flushes the repository before it is logged.
    pub(crate) last_new: Option<ObjectId>,
    /// Where the records of this generation end, as last written (never past the true end:
    /// it is written after the record it follows).
    pub(crate) end_hint: u64,
}

impl Header {
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[..16].copy_from_slice(if self.version == 1 { MAGIC_V1 } else { MAGIC });
        h[16..24].copy_from_slice(&self.generation.to_le_bytes());
        h[24..60].copy_from_slice(&self.boot);
        h[64..72].copy_from_slice(&self.end_hint.to_le_bytes());
        if let Some(id) = self.last_new {
            let b = id.as_bytes();
            h[72] = b.len() as u8;
            h[73..73 + b.len()].copy_from_slice(b);
        }
        let crc = crc32fast::hash(&h[..HEADER_LEN - 4]);
        h[HEADER_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
        h
    }

    pub(crate) fn decode(h: &[u8]) -> Option<Header> {
        if h.len() < HEADER_LEN {
            return None;
        }
        let version = match &h[..16] {
            m if m == MAGIC => 2,
            m if m == MAGIC_V1 => 1,
            _ => return None,
        };
        let crc = u32::from_le_bytes(h[HEADER_LEN - 4..HEADER_LEN].try_into().ok()?);
        if crc32fast::hash(&h[..HEADER_LEN - 4]) != crc {
            return None;
        }
        let n = h[72] as usize;
        let last_new = match n {
            0 => None,
            20 | 32 => Some(ObjectId::try_from(&h[73..73 + n]).ok()?),
            _ => return None,
        };
        Some(Header {
            version,
            generation: u64::from_le_bytes(h[16..24].try_into().ok()?),
            boot: h[24..60].try_into().ok()?,
            last_new,
            end_hint: u64::from_le_bytes(h[64..72].try_into().ok()?),
        })
    }
}

/// An open log. Callers hold the ledger's writer lock while they change it.
pub(crate) struct Wal {
    file: File,
    path: PathBuf,
    hash: HashKind,
    capacity: u64,
    pub(crate) header: Header,
    /// Where the next record goes.
    end: u64,
}

impl Wal {
    /// Opens the log at `path`, or `None` when there is none.
    ///
    /// `hint` is what the last append of this boot left in the ledger's writer-lock file (see
    /// [`hint`](Self::hint)): where the records end and the tip they left. It saves a scan of
    /// the records; without it, or when it is from another generation or boot, the records are
    /// scanned from the start.
    pub(crate) fn open(
        path: &Path,
        hash: HashKind,
        hint: Option<&[u8]>,
    ) -> std::io::Result<Option<Wal>> {
        let file = match OpenOptions::new().read(true).write(true).open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        // The size by seeking, not by `stat`: a stat marks the file's times as read, and the
        // kernel (Linux 6.13 on, multigrain timestamps) then stamps the next write with a fresh
        // fine-grained time, dirtying the inode on every append instead of once per clock tick.
        let capacity = (&file).seek(std::io::SeekFrom::End(0))?;
        if capacity < MIN_CAPACITY {
            // Not a log this code wrote (they are created at full size): start a new one.
            return Ok(None);
        }
        let mut head = [0u8; HEADER_LEN];
        let header = match file.read_exact_at(&mut head, 0) {
            Ok(()) => Header::decode(&head),
            Err(_) => None,
        };
        let mut wal = Wal {
            file,
            path: path.to_path_buf(),
            hash,
            capacity,
            header: header.unwrap_or(Header {
                version: 2,
                generation: 0,
                boot: [0; 36],
                last_new: None,
                end_hint: DATA_START,
            }),
            end: DATA_START,
        };
        if header.is_none() {
            // A torn header: the records themselves say which generation is current (the first
            // record written after a checkpoint starts the data area).
            if let Some((generation, _)) = wal.read_at(DATA_START, None) {
                wal.header.generation = generation;
            }
        }
        let mut from = DATA_START;
        if let Some(h) = hint.and_then(Header::decode)
            && h.generation == wal.header.generation
            && h.boot == boot_id()
            && (DATA_START..=capacity).contains(&h.end_hint)
        {
            from = h.end_hint;
            wal.header.last_new = h.last_new;
        }
        let (end, last) = wal.find_end(from);
        wal.end = end;
        wal.header.end_hint = end;
        if let Some(at) = last
            && let Some((_, rec)) = wal.read_at(at, Some(wal.header.generation))
        {
            wal.header.last_new = Some(rec.new);
        }
        Ok(Some(wal))
    }

    /// What an append leaves in the writer-lock file for the next one to [`open`](Self::open)
    /// with: the header as it stands in memory, stamped with this boot.
    pub(crate) fn hint(&self) -> [u8; HEADER_LEN] {
        Header {
            boot: boot_id(),
            ..self.header
        }
        .encode()
    }

    /// Creates a zero-filled log of `capacity` bytes at `path` (through a temporary file, so a
    /// crash never leaves a short one), flushed with its directory, its records of
    /// `generation`. A log made in place of another takes a generation after the other's (and
    /// after the hint's in the writer-lock file), so that no hint the other left is taken for
    /// this one's: it would put the end past records this log holds.
    pub(crate) fn create(
        path: &Path,
        hash: HashKind,
        capacity: u64,
        tip: Option<ObjectId>,
        generation: u64,
    ) -> std::io::Result<Wal> {
        let dir = path.parent().expect("the log lives in a directory");
        std::fs::create_dir_all(dir)?;
        let name = path
            .file_name()
            .expect("the log has a file name")
            .to_string_lossy()
            .into_owned();
        for k in 1..=MAX_PADS {
            // The pads of a log this one replaces.
            let _ = std::fs::remove_file(dir.join(pad_name(&name, k)));
        }
        let (mut tmp, pads) = match claim_inode_block(dir)? {
            Some((wal, pads)) => (wal, pads),
            None => (temp_in(dir)?, Vec::new()),
        };
        let header = Header {
            version: 2,
            generation,
            boot: boot_id(),
            last_new: tip,
            end_hint: DATA_START,
        };
        {
            let f = tmp.as_file_mut();
            let zeros = vec![0u8; 64 << 10];
            let mut left = capacity;
            while left > 0 {
                let n = left.min(zeros.len() as u64) as usize;
                f.write_all(&zeros[..n])?;
                left -= n as u64;
            }
            f.write_all_at(&header.encode(), 0)?;
            f.sync_all()?;
        }
        for (k, pad) in pads.into_iter().enumerate() {
            pad.persist(dir.join(pad_name(&name, k + 1)))
                .map_err(|e| e.error)?;
        }
        tmp.persist(path).map_err(|e| e.error)?;
        File::open(dir)?.sync_all()?;
        Ok(Wal::open(path, hash, None)?.expect("just created"))
    }

    /// Reads the record at `at`: its generation and the record, when it is valid (and, given
    /// `generation`, of that generation).
    fn read_at(&self, at: u64, generation: Option<u64>) -> Option<(u64, WalRecord)> {
        let mut head = [0u8; 8];
        self.file.read_exact_at(&mut head, at).ok()?;
        let len = u32::from_le_bytes(head[..4].try_into().ok()?) as u64;
        let crc = u32::from_le_bytes(head[4..].try_into().ok()?);
        if len < 8 || at + 8 + len > self.capacity {
            return None;
        }
        let mut p = vec![0u8; len as usize];
        self.file.read_exact_at(&mut p, at + 8).ok()?;
        if crc32fast::hash(&p) != crc {
            return None;
        }
        let (g, rec) = WalRecord::decode(&p, self.hash, self.header.version)?;
        if generation.is_some_and(|want| want != g) {
            return None;
        }
        Some((g, rec))
    }

    /// The end of the valid records of the current generation, scanning forward from `from`,
    /// and where the last record found starts.
    fn find_end(&self, from: u64) -> (u64, Option<u64>) {
        let mut at = from;
        let mut last = None;
        while let Some(len) = self.record_len_at(at) {
            last = Some(at);
            at += 8 + len;
        }
        (at, last)
    }

    /// The payload length of a valid record of the current generation at `at` (its CRC and
    /// generation are checked; the payload is not decoded).
    fn record_len_at(&self, at: u64) -> Option<u64> {
        let mut head = [0u8; 16];
        self.file.read_exact_at(&mut head, at).ok()?;
        let len = u32::from_le_bytes(head[..4].try_into().ok()?) as u64;
        let crc = u32::from_le_bytes(head[4..8].try_into().ok()?);
        let generation = u64::from_le_bytes(head[8..16].try_into().ok()?);
        if len < 8 || at + 8 + len > self.capacity || generation != self.header.generation {
            return None;
        }
        let mut p = vec![0u8; len as usize];
        self.file.read_exact_at(&mut p, at + 8).ok()?;
        (crc32fast::hash(&p) == crc).then_some(len)
    }

    /// The records of the current generation, in order.
    pub(crate) fn records(&self) -> Vec<WalRecord> {
        let mut out = Vec::new();
        let mut at = DATA_START;
        while let Some((_, rec)) = self.read_at(at, Some(self.header.generation)) {
            let mut head = [0u8; 4];
            if self.file.read_exact_at(&mut head, at).is_err() {
                break;
            }
            at += 8 + u32::from_le_bytes(head) as u64;
            out.push(rec);
        }
        out
    }

    /// True when the log holds records of its generation.
    pub(crate) fn is_empty(&self) -> bool {
        self.end == DATA_START
    }

    /// Appends `rec`; with `durable`, returns only once it is on disk. Returns false, writing
    /// nothing, when it does not fit.
    pub(crate) fn append(&mut self, rec: &WalRecord, durable: bool) -> std::io::Result<bool> {
        let bytes = rec.encode(self.header.generation);
        if self.end + bytes.len() as u64 > self.capacity {
            return Ok(false);
        }
        self.file.write_all_at(&bytes, self.end)?;
        if durable {
            self.file.sync_data()?;
        }
        self.end += bytes.len() as u64;
        // The header on disk keeps what the last reset wrote: rewriting it here would add a
        // second page to every flush. Where the records end travels in the hint instead.
        self.header.end_hint = self.end;
        self.header.last_new = Some(rec.new);
        Ok(true)
    }

    /// Empties the log once the repository is flushed with the ref at `tip`: zeroes the records
    /// (so no body outlives a checkpoint or a redaction here), starts a new generation owned by
    /// this boot, and flushes.
    pub(crate) fn reset(&mut self, tip: Option<ObjectId>) -> std::io::Result<()> {
        let zeros = vec![0u8; 64 << 10];
        let mut at = DATA_START;
        while at < self.end {
            let n = (self.end - at).min(zeros.len() as u64);
            self.file.write_all_at(&zeros[..n as usize], at)?;
            at += n;
        }
        self.header = Header {
            version: 2,
            generation: self.header.generation.wrapping_add(1),
            boot: boot_id(),
            last_new: tip,
            end_hint: DATA_START,
        };
        self.end = DATA_START;
        self.file.write_all_at(&self.header.encode(), 0)?;
        self.file.sync_data()
    }

    /// True when the log was last written in another boot (or the boot is unknown) and holds
    /// records, so the files it describes may not all have reached the disk.
    pub(crate) fn needs_recovery(&self) -> bool {
        !self.is_empty() && (self.header.boot != boot_id() || self.header.boot == [0; 36])
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.capacity
    }
}

/// The most pad files a log keeps beside it (see [`claim_inode_block`]).
const MAX_PADS: usize = 63;

/// The name of the `k`th pad of the log file `name` (a log's name ends in `.wal`, a pad's in
/// a number, so the two never meet).
fn pad_name(name: &str, k: usize) -> String {
    format!("{name}.pad-{k}")
}

/// An empty temporary file in `dir`, readable and writable as any file this repository's users
/// create (the umask applies), not only by whoever appended first.
fn temp_in(dir: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    tempfile::Builder::new()
        .prefix(".wal")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .tempfile_in(dir)
}

/// On ext2/3/4, gives the log an inode-table block to itself as far as it can: returns a
/// temporary file for the log and the empty files that hold the other inodes of its table block
/// that were free, or `None` on another file system.
///
/// Why: without a journal, ext4's fsync and fdatasync (Linux 6.x) write the synced file's
/// inode-table block whenever it is dirty, a whole extra device round trip before the flush.
/// A block holds 16 inodes (256 bytes each in a 4 KiB block, mke2fs's default), and files
/// created one after another get neighbouring inodes: left alone, the log would share its block
/// with the ref's directory, the ref, the spare and early object directories, which every
/// append changes, so every append's flush would pay that write. Holding the block's free inodes
/// in files nobody writes keeps those out, and the block stays clean except when the log's own
/// times change (once per clock tick at most). With a journal the extra write does not happen
/// and the pads cost a few empty files.
///
/// ext4 hands out the lowest free inode of the directory's group (skipping, without a journal,
/// those freed in the last minute), so files created in a row climb through the table. Once one
/// lands past a block, that block has nothing left to hand out: every inode in it is either ours
/// or was taken before. The first block that is all ours wins; in a table with holes, after a
/// few blocks' worth of files, the block holding the most of ours does.
#[allow(clippy::type_complexity)]
fn claim_inode_block(
    dir: &Path,
) -> std::io::Result<Option<(tempfile::NamedTempFile, Vec<tempfile::NamedTempFile>)>> {
    use std::os::unix::fs::MetadataExt as _;
    const EXT_SUPER_MAGIC: u64 = 0xEF53;
    const INODE_SIZE: u64 = 256;
    let probe = temp_in(dir)?;
    let Ok(fs) = rustix::fs::fstatfs(probe.as_file()) else {
        return Ok(None);
    };
    #[allow(clippy::unnecessary_cast)]
    let (kind, bsize) = (fs.f_type as u64, fs.f_bsize as u64);
    if kind != EXT_SUPER_MAGIC || bsize < INODE_SIZE || bsize / INODE_SIZE > MAX_PADS as u64 + 1 {
        return Ok(None);
    }
    let per_block = bsize / INODE_SIZE;
    let block_of = |ino: u64| ino.saturating_sub(1) / per_block;
    let mut files: Vec<(u64, tempfile::NamedTempFile)> = Vec::new();
    // The best block left behind so far, and how many of our files it holds.
    let mut best: Option<(u64, u64)> = None;
    let mut next = Some(probe);
    for _ in 0..4 * per_block {
        let f = match next.take() {
            Some(f) => f,
            None => temp_in(dir)?,
        };
        let ino = f.as_file().metadata()?.ino();
        let block = block_of(ino);
        if let Some(&(prev, _)) = files.last()
            && block_of(prev) != block
        {
            let left = block_of(prev);
            let ours = files.iter().filter(|(i, _)| block_of(*i) == left).count() as u64;
            if best.is_none_or(|(_, n)| ours > n) {
                best = Some((left, ours));
            }
        }
        files.push((ino, f));
        let ours = files.iter().filter(|(i, _)| block_of(*i) == block).count() as u64;
        if ours == per_block {
            best = Some((block, ours));
            break;
        }
    }
    let Some((block, _)) = best else {
        return Ok(None);
    };
    // The first file of the block becomes the log, the rest its pads. Files elsewhere are
    // dropped, which deletes them.
    let mut inside: Vec<tempfile::NamedTempFile> = files
        .into_iter()
        .filter(|(i, _)| block_of(*i) == block)
        .map(|(_, f)| f)
        .collect();
    let wal = inside.remove(0);
    Ok(Some((wal, inside)))
}

mod group;
mod recover;
pub(crate) use group::{Mark, note_written};
#[cfg(test)]
mod tests;
