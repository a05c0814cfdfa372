//! The write-ahead log that makes a single durable append cost one flush.
//!
//! An append writes three loose objects and moves a ref. Flushing each of those files (and the
//! directories that gained names) costs several device flushes per append. With the log, an
//! append writes its objects and moves its ref without flushing them, then writes one record
//! holding the old tip, the new tip and the objects' bytes to `.git/forum/wal/NAME.wal` and
//! flushes that file alone. The file is created at full size and zero-filled once, so that flush
//! rewrites data blocks in place and touches no file-system metadata. The append returns only
//! after the record is on disk.
//!
//! Every process sees the objects and the ref at once (they are in the page cache). What a
//! power loss can take away is only what the page cache had not written yet: after a reboot, the
//! next `git forum` command on the ledger notices that the log was written during an earlier
//! boot, rewrites any logged object that is missing or damaged, puts the ref back on the last
//! logged tip if it was left behind or broken, restores the reflog lines, flushes everything and
//! empties the log. A checkpoint (`git forum sync`, a full log, a batch or a redaction) flushes
//! the repository and empties the log the same way, zeroing the records so no body outlives a
//! redaction in the log.
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
use gix::objs::{Find as _, Kind};

use super::git::{AUTHOR_EMAIL, GitStore, StoreError, object, with_fast_compressor};
use super::pack::Obj;

const MAGIC: &[u8; 16] = b"git-forum wal 2\n";
/// The header of a format-1 log (objects stored raw), read but no longer written.
const MAGIC_V1: &[u8; 16] = b"git-forum wal 1\n";
/// The largest objects section a record may inflate to (a single append is far smaller).
const MAX_OBJECTS_LEN: usize = 256 << 20;
/// Records start here; the header fills the first block.
pub(crate) const DATA_START: u64 = 4096;
/// The default size of a log (`git config forum.walSize` changes it).
pub(crate) const DEFAULT_CAPACITY: u64 = 1 << 20;
/// The smallest log accepted.
pub(crate) const MIN_CAPACITY: u64 = 64 << 10;
const HEADER_LEN: usize = 128;

/// One logged append: the ref moved from `old` to `new`, writing `objects`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) old: Option<ObjectId>,
    pub(crate) new: ObjectId,
    pub(crate) objects: Vec<(Kind, Vec<u8>)>,
}

impl Record {
    pub(crate) fn new(old: Option<ObjectId>, new: ObjectId, objects: &[Obj]) -> Record {
        Record {
            old,
            new,
            objects: objects.iter().map(|o| (o.kind, o.data.clone())).collect(),
        }
    }

    fn encode(&self, generation: u64) -> Vec<u8> {
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
    fn decode(p: &[u8], hash: HashKind, version: u8) -> Option<(u64, Record)> {
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
        (r.at == r.p.len()).then_some((generation, Record { old, new, objects }))
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
    fn encode(&self) -> [u8; HEADER_LEN] {
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

    fn decode(h: &[u8]) -> Option<Header> {
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
    /// crash never leaves a short one), flushed with its directory.
    pub(crate) fn create(
        path: &Path,
        hash: HashKind,
        capacity: u64,
        tip: Option<ObjectId>,
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
            generation: 1,
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
    fn read_at(&self, at: u64, generation: Option<u64>) -> Option<(u64, Record)> {
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
        let (g, rec) = Record::decode(&p, self.hash, self.header.version)?;
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
    pub(crate) fn records(&self) -> Vec<Record> {
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
    pub(crate) fn append(&mut self, rec: &Record, durable: bool) -> std::io::Result<bool> {
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

// ----- the ledger side -----

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
            Some(mut wal) if wal.capacity() != capacity => {
                // Resized by `git config forum.walSize`: empty the old one, then make the new.
                self.checkpoint_wal_with(&mut wal, false)?;
                drop(wal);
                Wal::create(&path, self.object_hash(), capacity, self.tip_id()?)
                    .map_err(wal_io(&path))?
            }
            Some(mut wal) => {
                if wal.needs_recovery() {
                    self.recover_with(&mut wal)?;
                } else if wal.header.version < 2 || wal.header.boot != boot_id() {
                    // An earlier version's format, or an empty log last reset in an earlier
                    // boot (its header must name this boot before it holds this boot's
                    // records): flush and start over.
                    self.checkpoint_wal_with(&mut wal, true)?;
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
                Wal::create(&path, self.object_hash(), capacity, tip).map_err(wal_io(&path))?
            }
        };
        Ok(wal)
    }

    /// Logs an append that moved the ref from `old` to `new` writing `objects`, returning once
    /// the record is on disk when `durable`. When the log's last tip is not `old`, the parent
    /// chain is not all in the log: the repository is flushed and the log emptied first. A full
    /// log is emptied the same way after this append (which the flush then covers).
    pub(crate) fn wal_log(
        &self,
        wal: &mut Wal,
        old: Option<ObjectId>,
        new: ObjectId,
        objects: &[Obj],
        durable: bool,
    ) -> Result<(), StoreError> {
        let path = wal.path().to_path_buf();
        if wal.header.last_new != old {
            // The parent chain is not all in the log: flush it, then log from here.
            self.flush_repository()?;
            wal.reset(old).map_err(wal_io(&path))?;
        }
        let rec = Record::new(old, new, objects);
        if !wal.append(&rec, durable).map_err(wal_io(&path))? {
            // Full: flush everything, this append included, and start a new generation.
            self.flush_repository()?;
            wal.reset(Some(new)).map_err(wal_io(&path))?;
        }
        Ok(())
    }

    /// Flushes the repository and empties the ledger's log, if it has one. Batches, redactions
    /// and `sync` call it (holding the writer lock) before they change the ref themselves.
    pub(crate) fn checkpoint_wal(&self) -> Result<(), StoreError> {
        self.checkpoint_wal_if(false)
    }

    /// [`checkpoint_wal`](Self::checkpoint_wal) that flushes the repository even when the log
    /// has nothing to empty (for `sync`, whose flush also covers `--no-fsync` writes).
    pub(crate) fn checkpoint_wal_forced(&self) -> Result<(), StoreError> {
        self.checkpoint_wal_if(true)
    }

    fn checkpoint_wal_if(&self, force: bool) -> Result<(), StoreError> {
        let path = self.wal_path();
        match Wal::open(&path, self.object_hash(), None).map_err(wal_io(&path))? {
            Some(mut wal) => self.checkpoint_wal_with(&mut wal, force),
            None if force => self.flush_repository(),
            None => Ok(()),
        }
    }

    fn checkpoint_wal_with(&self, wal: &mut Wal, force: bool) -> Result<(), StoreError> {
        if wal.needs_recovery() {
            return self.recover_with(wal);
        }
        let tip = self.tip_id().ok().flatten();
        if force || !wal.is_empty() || wal.header.last_new != tip {
            // The log is about to be emptied: first put back anything of it a prune deleted.
            self.restore_logged_objects(&wal.records())?;
            self.flush_repository()?;
            let path = wal.path().to_path_buf();
            wal.reset(tip).map_err(wal_io(&path))?;
        }
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
        Ok(())
    }

    /// Replays the log: every logged object that is missing or damaged is written again, the
    /// ref is put back on the last logged tip when it was left on an earlier logged tip (or is
    /// missing or unreadable), missing reflog lines are restored, and after a flush the log is
    /// emptied. The caller holds the writer lock.
    fn recover_with(&self, wal: &mut Wal) -> Result<(), StoreError> {
        let records = wal.records();
        self.restore_logged_objects(&records)?;
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
    fn restore_logged_objects(&self, records: &[Record]) -> Result<usize, StoreError> {
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

    /// The records the write-ahead log holds (none when there is no log).
    pub(crate) fn wal_records(&self) -> Result<Vec<Record>, StoreError> {
        let path = self.wal_path();
        Ok(Wal::open(&path, self.object_hash(), None)
            .map_err(wal_io(&path))?
            .map(|w| w.records())
            .unwrap_or_default())
    }

    /// Puts the ledger's ref back on `id` (doctor, after a deletion or damage outside git
    /// forum), with a reflog line. The caller holds the writer lock.
    pub(crate) fn restore_ref(&self, id: ObjectId) -> Result<(), StoreError> {
        if self.refs_via_git() {
            let id = id.to_string();
            return super::refs::git_ok(
                self.common_dir(),
                &[
                    "update-ref",
                    "--create-reflog",
                    "-m",
                    "forum: doctor --repair",
                    self.refname(),
                    &id,
                ],
            );
        }
        let old = self.tip_id().ok().flatten();
        self.write_ref_file(id)?;
        let line = format!(
            "{} {id} {} {} +0000\tforum: doctor --repair\n",
            old.unwrap_or_else(|| ObjectId::null(self.object_hash())),
            super::git::COMMITTER,
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
        match self.repo().objects.try_find(&o.id, &mut buf) {
            Ok(Some(d)) => d.kind == o.kind && d.data == o.data.as_slice(),
            _ => false,
        }
    }

    /// Points the ref at `id` by writing its file directly (it may be empty or garbage, which
    /// a ref transaction would refuse to read), under git's lock-file protocol.
    fn write_ref_file(&self, id: ObjectId) -> Result<(), StoreError> {
        let path = self.ref_path();
        let lock = PathBuf::from(format!("{}.lock", path.display()));
        // The caller holds the writer lock; its file says whose ref lock this may be.
        let held = File::open(self.writer_lock_path()).map_err(|e| io_err(&lock, e))?;
        let noted = super::git::read_intent(&held, self.object_hash());
        if lock.exists() && !self.recover_stale_lock(&lock, &held, noted) {
            return Err(StoreError::Contended(format!(
                "{} is being updated by another process; run the command again",
                path.display()
            )));
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
        }
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&lock)
            .map_err(|e| io_err(&lock, e))?;
        writeln!(f, "{id}").map_err(|e| io_err(&lock, e))?;
        drop(f);
        std::fs::rename(&lock, &path).map_err(|e| io_err(&path, e))
    }

    /// Appends a reflog line for every logged move the reflog lacks, after dropping a last line
    /// that a crash left incomplete.
    fn restore_reflog(&self, records: &[Record]) -> Result<(), StoreError> {
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
        let missing: Vec<&Record> = records
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

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(kind: Kind, data: &[u8]) -> Obj {
        let id = gix::objs::compute_hash(HashKind::Sha1, kind, data).unwrap();
        Obj {
            id,
            kind,
            data: data.to_vec(),
        }
    }

    #[test]
    fn records_round_trip_and_a_torn_tail_ends_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal/main.wal");
        let mut wal = Wal::create(&path, HashKind::Sha1, MIN_CAPACITY, None).unwrap();
        assert!(wal.is_empty());
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o600, 0o600, "{mode:o}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), MIN_CAPACITY);
        let a = obj(Kind::Blob, b"{\"a\":1}");
        let b = obj(Kind::Blob, b"{\"b\":2}");
        let r1 = Record::new(None, a.id, std::slice::from_ref(&a));
        let r2 = Record::new(Some(a.id), b.id, &[b.clone(), a.clone()]);
        assert!(wal.append(&r1, true).unwrap());
        assert!(wal.append(&r2, false).unwrap());
        let end = wal.end;
        drop(wal);

        let wal = Wal::open(&path, HashKind::Sha1, None).unwrap().unwrap();
        assert_eq!(wal.records(), vec![r1.clone(), r2.clone()]);
        assert_eq!(wal.end, end);
        assert_eq!(wal.header.last_new, Some(b.id));
        assert!(!wal.needs_recovery(), "written in this boot");

        // A torn third record (its CRC does not match) is not part of the log.
        let mut torn =
            Record::new(Some(b.id), a.id, std::slice::from_ref(&a)).encode(wal.header.generation);
        let last = torn.len() - 1;
        torn[last] ^= 1;
        wal.file.write_all_at(&torn, end).unwrap();
        drop(wal);
        let mut wal = Wal::open(&path, HashKind::Sha1, None).unwrap().unwrap();
        assert_eq!(wal.records().len(), 2);
        assert_eq!(wal.end, end, "appends go over the torn record");

        // A reset empties it; the old records do not come back.
        wal.reset(None).unwrap();
        drop(wal);
        let mut wal = Wal::open(&path, HashKind::Sha1, None).unwrap().unwrap();
        assert!(wal.is_empty());
        assert!(wal.records().is_empty());

        // A record that cannot fit (even deflated: these bytes do not compress) is refused
        // without writing.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..MIN_CAPACITY)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let big = obj(Kind::Blob, &noise);
        assert!(
            !wal.append(&Record::new(None, big.id, &[big]), true)
                .unwrap()
        );
        assert!(wal.is_empty());
    }

    #[test]
    fn records_are_stored_deflated_and_a_format_1_log_is_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("main.wal");
        let mut wal = Wal::create(&path, HashKind::Sha1, MIN_CAPACITY, None).unwrap();
        let body = format!(
            "{{\"items\":[{}]}}",
            vec!["{\"k\":\"value\"}"; 200].join(",")
        );
        let a = obj(Kind::Blob, body.as_bytes());
        let r = Record::new(None, a.id, std::slice::from_ref(&a));
        let encoded = r.encode(wal.header.generation);
        assert!(
            encoded.len() * 4 < body.len(),
            "{} bytes for a {}-byte body",
            encoded.len(),
            body.len()
        );
        assert!(wal.append(&r, true).unwrap());
        drop(wal);
        assert_eq!(
            Wal::open(&path, HashKind::Sha1, None)
                .unwrap()
                .unwrap()
                .records(),
            vec![r.clone()]
        );

        // The same record as an earlier version wrote it: objects stored raw, header "1".
        let mut wal = Wal::create(&path, HashKind::Sha1, MIN_CAPACITY, None).unwrap();
        wal.header.version = 1;
        wal.file.write_all_at(&wal.header.encode(), 0).unwrap();
        let mut p = wal.header.generation.to_le_bytes().to_vec();
        p.push(0);
        p.extend_from_slice(a.id.as_bytes());
        p.extend_from_slice(&1u32.to_le_bytes());
        p.push(kind_code(Kind::Blob));
        p.extend_from_slice(&(body.len() as u32).to_le_bytes());
        p.extend_from_slice(body.as_bytes());
        let mut v1 = (p.len() as u32).to_le_bytes().to_vec();
        v1.extend_from_slice(&crc32fast::hash(&p).to_le_bytes());
        v1.extend_from_slice(&p);
        wal.file.write_all_at(&v1, DATA_START).unwrap();
        drop(wal);
        let wal = Wal::open(&path, HashKind::Sha1, None).unwrap().unwrap();
        assert_eq!(wal.header.version, 1);
        assert_eq!(wal.records(), vec![r]);
    }

    #[test]
    fn a_torn_header_falls_back_to_the_records_generation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("main.wal");
        let mut wal = Wal::create(&path, HashKind::Sha1, MIN_CAPACITY, None).unwrap();
        wal.reset(None).unwrap(); // generation 2
        let a = obj(Kind::Blob, b"1");
        let r = Record::new(None, a.id, &[a]);
        wal.append(&r, true).unwrap();
        wal.file.write_all_at(&[0xff; 8], 20).unwrap();
        drop(wal);
        let wal = Wal::open(&path, HashKind::Sha1, None).unwrap().unwrap();
        assert_eq!(wal.header.generation, 2);
        assert_eq!(wal.records(), vec![r.clone()]);
        assert_eq!(
            wal.header.last_new,
            Some(r.new),
            "the last record names the tip, whatever the header says"
        );
        assert!(
            wal.needs_recovery(),
            "a torn header is checked like another boot's log"
        );
    }

    #[test]
    fn a_log_on_ext4_owns_its_inode_table_block() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = tempfile::tempdir().unwrap();
        let wal_dir = dir.path().join("wal");
        let path = wal_dir.join("main.wal");
        let pads = |n: usize| -> Vec<PathBuf> {
            (1..=n)
                .map(|k| wal_dir.join(pad_name("main.wal", k)))
                .collect()
        };
        let fs = rustix::fs::statfs(dir.path()).unwrap();
        #[allow(clippy::unnecessary_cast)]
        let ext = fs.f_type as u64 == 0xEF53;
        // Twice: a log made again (a new `forum.walSize`) replaces the first one's pads.
        for capacity in [MIN_CAPACITY, 2 * MIN_CAPACITY] {
            drop(Wal::create(&path, HashKind::Sha1, capacity, None).unwrap());
            let mut names: Vec<String> = std::fs::read_dir(&wal_dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            if !ext {
                println!("not ext2/3/4 here: the log gets no pads");
                assert_eq!(names, ["main.wal"]);
                continue;
            }
            // The log and its pads, numbered from 1, and no temporary file. How many pads
            // depends on the holes in this directory's inode table; a fresh one gives 15.
            let k = names.len() - 1;
            assert!(k <= 15, "{names:?}");
            let mut want: Vec<String> = pads(k)
                .iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect();
            want.push("main.wal".into());
            want.sort();
            assert_eq!(names, want);
            let block = |p: &Path| (std::fs::metadata(p).unwrap().ino() - 1) / 16;
            for p in pads(k) {
                assert_eq!(std::fs::metadata(&p).unwrap().len(), 0, "{}", p.display());
                assert_eq!(
                    block(&p),
                    block(&path),
                    "{} shares the log's block",
                    p.display()
                );
            }
            println!("the log holds its inode-table block with {k} pads");
            assert_eq!(std::fs::metadata(&path).unwrap().len(), capacity);
        }
    }
}
