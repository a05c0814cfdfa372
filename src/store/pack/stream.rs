//! A pack written object by object, for imports too large to hold in memory.
//!
//! [`PackStream`] takes each object as the import builds it and hands batches of them to a
//! thread of its own, which deflates, checksums and writes them ([`Writer`]), so the import's
//! thread goes on reading and hashing the next entries meanwhile. At the end the pack's
//! trailing checksum (a read of the whole pack) and the index (a merge of the sorted runs of
//! its rows) are made at once on two threads: the index needs the pack's checksum only for its
//! last bytes. The pack's bytes are those the writer alone makes from the same objects.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use gix::ObjectId;
use gix::hash::Kind as HashKind;
use gix::objs::Kind;
use gix::odb::pack;
use gix::zlib::Compression;

use super::{PackGuard, header_for, install, tmp_name};
use crate::store::checksum::Checksum;
use crate::store::spill::SortedRuns;

/// Which part of a streamed pack an object goes to: the commits lead the pack (a walk reads
/// them one after another), the trees and bodies follow in the order they were added.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Section {
    Lead,
    Rest,
}

/// One index row while a pack is streamed, as bytes that sort as the index does: the id
/// (left-aligned in 32 bytes, so SHA-1 and SHA-256 ids sort alike), the offset within its
/// section (big-endian, the top bit set for [`Section::Rest`]) and the CRC-32 of the packed
/// entry.
type Row = [u8; 44];

const REST_BIT: u64 = 1 << 63;
/// Index rows held in memory before a sorted run of them goes to a temporary file
/// (44 bytes each: 1.4 MiB). Small enough that an import's memory is the same at 10,000
/// entries (about 30,000 objects, one run) as at any larger size: with runs of 11 MiB the
/// peak grew with the ledger up to about 90,000 entries (18 MiB at 10,000, 29 at 100,000).
/// More runs cost the merge a deeper heap, not another pass: every run was spilled already.
const RUN_ROWS: usize = 1 << 15;

/// Bytes of objects gathered before a batch goes to the writer's thread, and the most
/// objects in one batch: a hand-off per few hundred entries, not per object.
const BATCH_BYTES: usize = 256 << 10;
const BATCH_OBJECTS: usize = 4096;
/// Batches queued for the writer beyond the one it is writing: the import runs at most this
/// far ahead of the pack (about a megabyte), so memory stays flat.
const QUEUED: usize = 2;

/// A temporary file that is removed when dropped, unless taken.
struct TmpFile {
    path: Option<PathBuf>,
}

impl TmpFile {
    fn create(dir: &Path, prefix: &str) -> std::io::Result<(TmpFile, File)> {
        let path = tmp_name(dir, prefix);
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok((TmpFile { path: Some(path) }, f))
    }

    fn path(&self) -> &Path {
        self.path.as_deref().expect("not taken")
    }
}

impl Drop for TmpFile {
    fn drop(&mut self) {
        if let Some(p) = self.path.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Objects on their way to the writer's thread: each one's id, kind, section and length,
/// and their bytes one after another.
struct Batch {
    objects: Vec<(ObjectId, Kind, Section, usize)>,
    data: Vec<u8>,
}

impl Batch {
    fn new() -> Batch {
        Batch {
            objects: Vec::with_capacity(BATCH_OBJECTS),
            data: Vec::with_capacity(BATCH_BYTES + (64 << 10)),
        }
    }
}

/// A pack streamed through a writer on a thread of its own (see the module doc). Dropped
/// unfinished, it leaves nothing behind; an error of the writer is returned by the next
/// [`PackStream::add`] or by [`PackStream::finish`].
pub(crate) struct PackStream {
    batch: Batch,
    to_writer: Option<SyncSender<Batch>>,
    /// Batches the writer is done with, to be filled again.
    spare: Receiver<Batch>,
    writer: Option<JoinHandle<std::io::Result<Writer>>>,
}

impl PackStream {
    /// Starts a pack in `objects_dir/pack`, deflating blobs at `level` (trees and commits are
    /// stored).
    pub(crate) fn create(
        objects_dir: &Path,
        hash: HashKind,
        level: Compression,
    ) -> std::io::Result<PackStream> {
        PackStream::start(Writer::create(objects_dir, hash, level)?)
    }

    fn start(mut writer: Writer) -> std::io::Result<PackStream> {
        let (to_writer, batches) = sync_channel::<Batch>(QUEUED);
        let (back, spare) = sync_channel::<Batch>(QUEUED + 1);
        let handle = std::thread::Builder::new()
            .name("forum-pack".into())
            .spawn(move || {
                for mut b in batches {
                    let mut at = 0;
                    for &(id, kind, section, len) in &b.objects {
                        writer.add(&id, kind, &b.data[at..at + len], section)?;
                        at += len;
                    }
                    b.objects.clear();
                    b.data.clear();
                    let _ = back.try_send(b);
                }
                Ok(writer)
            })?;
        Ok(PackStream {
            batch: Batch::new(),
            to_writer: Some(to_writer),
            spare,
            writer: Some(handle),
        })
    }

    /// Adds one object (its id already computed from `kind` and `data`); each id at most once.
    pub(crate) fn add(
        &mut self,
        id: &ObjectId,
        kind: Kind,
        data: &[u8],
        section: Section,
    ) -> std::io::Result<()> {
        self.batch.objects.push((*id, kind, section, data.len()));
        self.batch.data.extend_from_slice(data);
        if self.batch.data.len() >= BATCH_BYTES || self.batch.objects.len() >= BATCH_OBJECTS {
            self.hand_off()?;
        }
        Ok(())
    }

    /// Sends the batch gathered so far to the writer.
    fn hand_off(&mut self) -> std::io::Result<()> {
        let next = self.spare.try_recv().unwrap_or_else(|_| Batch::new());
        let full = std::mem::replace(&mut self.batch, next);
        let sent = match &self.to_writer {
            Some(tx) => tx.send(full).is_ok(),
            None => false,
        };
        if sent {
            return Ok(());
        }
        // The writer stopped: on an error, which is the answer.
        match self.stop() {
            Err(e) => Err(e),
            Ok(_) => Err(std::io::Error::other("the pack's writer stopped early")),
        }
    }

    /// Ends the writer's input and waits for it: the writer, or the error that stopped it.
    fn stop(&mut self) -> std::io::Result<Writer> {
        self.to_writer = None;
        match self.writer.take() {
            Some(h) => h
                .join()
                .map_err(|_| std::io::Error::other("the pack's writer panicked"))?,
            None => Err(std::io::Error::other("the pack's writer already stopped")),
        }
    }

    /// Completes the pack and its index and moves them into place behind a `.keep`.
    /// `durable` fsyncs both and the directory.
    pub(crate) fn finish(mut self, durable: bool) -> std::io::Result<PackGuard> {
        if !self.batch.objects.is_empty() {
            self.hand_off()?;
        }
        self.stop()?.finish(durable)
    }
}

impl Drop for PackStream {
    fn drop(&mut self) {
        // The writer removes its temporary files as it ends; wait for that.
        self.to_writer = None;
        if let Some(h) = self.writer.take() {
            let _ = h.join();
        }
    }
}

/// The writer of a streamed pack: each object is deflated and written as it comes, and only
/// its index row is kept (sorted runs of rows spill to a temporary file, merged into the
/// `.idx` at the end). The object count in the header and the trailing checksum are filled in
/// by [`Writer::finish`], which reads the pack back once. Dropped unfinished, it leaves
/// nothing behind.
struct Writer {
    pack_dir: PathBuf,
    hash: HashKind,
    lead: (TmpFile, BufWriter<File>),
    lead_len: u64,
    rest: (TmpFile, BufWriter<File>),
    rest_len: u64,
    count: u64,
    fan: [u32; 256],
    /// The index rows, in sorted runs of [`RUN_ROWS`] (tests use fewer).
    rows: SortedRuns<44>,
    /// Whole-buffer compressors: libdeflate at the pack's level for bodies of at least
    /// [`STORE_BELOW`] bytes, and at level 0 (stored blocks, no match finder to set up) for
    /// everything else. A zlib stream reset per object clears its hash table (128 KiB at level
    /// 1), which cost more than compressing an entry's small objects.
    comp: libdeflater::Compressor,
    stored: libdeflater::Compressor,
    zbuf: Vec<u8>,
}

/// Bodies shorter than this are stored in an import's pack rather than deflated: deflate saves
/// a few bytes on a JSON body this short, for the price of setting up its match finder.
const STORE_BELOW: usize = 256;

/// Compresses `input` whole into `out` (cleared first) as one zlib stream.
fn zlib_whole(
    c: &mut libdeflater::Compressor,
    input: &[u8],
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    out.clear();
    out.resize(c.zlib_compress_bound(input.len()), 0);
    let n = c
        .zlib_compress(input, out)
        .map_err(|e| std::io::Error::other(format!("deflate: {e:?}")))?;
    out.truncate(n);
    Ok(())
}

impl Writer {
    /// Starts a pack in `objects_dir/pack`, deflating blobs at `level` (trees and commits are
    /// stored).
    pub(crate) fn create(
        objects_dir: &Path,
        hash: HashKind,
        level: Compression,
    ) -> std::io::Result<Writer> {
        let pack_dir = objects_dir.join("pack");
        std::fs::create_dir_all(&pack_dir)?;
        let (lt, lf) = TmpFile::create(&pack_dir, "tmp_pack")?;
        let (rt, rf) = TmpFile::create(&pack_dir, "tmp_pack_rest")?;
        let mut lead = BufWriter::with_capacity(1 << 20, lf);
        // The header, its count written at the end.
        let header = pack::data::header::encode(pack::data::Version::V2, 0);
        lead.write_all(&header)?;
        Ok(Writer {
            rows: SortedRuns::new(&pack_dir, RUN_ROWS),
            pack_dir,
            hash,
            lead: (lt, lead),
            lead_len: header.len() as u64,
            rest: (rt, BufWriter::with_capacity(1 << 20, rf)),
            rest_len: 0,
            count: 0,
            fan: [0; 256],
            comp: libdeflater::Compressor::new(
                libdeflater::CompressionLvl::new(level.level())
                    .map_err(|e| std::io::Error::other(format!("deflate level: {e:?}")))?,
            ),
            stored: libdeflater::Compressor::new(
                libdeflater::CompressionLvl::new(0).expect("level 0 is valid"),
            ),
            zbuf: Vec::with_capacity(64 * 1024),
        })
    }

    /// Adds one object (its id already computed from `kind` and `data`); each id at most once.
    pub(crate) fn add(
        &mut self,
        id: &ObjectId,
        kind: Kind,
        data: &[u8],
        section: Section,
    ) -> std::io::Result<()> {
        let mut hbuf = [0u8; 32];
        let hlen = header_for(kind).write_to(data.len() as u64, &mut &mut hbuf[..])?;
        // A ledger tree is one name and a binary id, which deflate cannot shrink (see
        // `write_pack_stream`). A ledger commit is mostly hex ids and hashes, which deflate
        // shrinks by about a sixth at the price of most of an import's CPU (and of the walk's
        // inflating when verify reads it back): commits are stored too, and short bodies.
        let c = if matches!(kind, Kind::Tree | Kind::Commit) || data.len() < STORE_BELOW {
            &mut self.stored
        } else {
            &mut self.comp
        };
        zlib_whole(c, data, &mut self.zbuf)?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&hbuf[..hlen]);
        crc.update(&self.zbuf);
        let (w, len, bit) = match section {
            Section::Lead => (&mut self.lead.1, &mut self.lead_len, 0),
            Section::Rest => (&mut self.rest.1, &mut self.rest_len, REST_BIT),
        };
        w.write_all(&hbuf[..hlen])?;
        w.write_all(&self.zbuf)?;
        let mut row: Row = [0; 44];
        row[..id.as_slice().len()].copy_from_slice(id.as_slice());
        row[32..40].copy_from_slice(&(*len | bit).to_be_bytes());
        row[40..].copy_from_slice(&crc.finalize().to_be_bytes());
        *len += (hlen + self.zbuf.len()) as u64;
        self.fan[row[0] as usize] += 1;
        self.count += 1;
        self.rows.push(row)
    }

    /// Completes the pack and its index and moves them into place behind a `.keep`.
    /// `durable` fsyncs both and the directory.
    fn finish(self, durable: bool) -> std::io::Result<PackGuard> {
        use std::os::unix::fs::FileExt as _;
        let count = u32::try_from(self.count)
            .map_err(|_| std::io::Error::other("too many objects for one pack"))?;
        let Writer {
            pack_dir,
            hash,
            lead: (mut lead_tmp, lead),
            lead_len,
            rest: (_rest_tmp, rest),
            rest_len,
            fan,
            rows,
            ..
        } = self;
        let lead = lead.into_inner().map_err(|e| e.into_error())?;
        let rest = rest.into_inner().map_err(|e| e.into_error())?;
        lead.write_all_at(
            &pack::data::header::encode(pack::data::Version::V2, count),
            0,
        )?;
        // The pack's checksum on a thread of its own while this one merges the index rows.
        let (pack_hash, idx) = std::thread::scope(|s| {
            let sealed = s.spawn(|| seal_pack(&lead, lead_len, &rest, rest_len, hash));
            let idx = IdxBody::write(&pack_dir, hash, &fan, rows, lead_len);
            let pack_hash = sealed
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the pack's checksum panicked")));
            (pack_hash, idx)
        });
        let pack_hash = pack_hash?;
        if durable {
            lead.sync_all()?;
        }
        let (idx_tmp, idx) = idx?.seal(&pack_hash)?;
        if durable {
            idx.sync_all()?;
        }
        drop(idx);
        let guard = install(
            &pack_dir,
            lead_tmp.path(),
            idx_tmp.path(),
            &pack_hash,
            durable,
        )?;
        // Renamed (or, when the same pack already existed, removed): nothing to clean up.
        lead_tmp.path = None;
        let mut idx_tmp = idx_tmp;
        idx_tmp.path = None;
        Ok(guard)
    }
}

/// Reads the pack's first part back (its header now holding the count), appends the second
/// part after it, and writes the checksum of all of it at the end: the pack's checksum.
fn seal_pack(
    lead: &File,
    lead_len: u64,
    rest: &File,
    rest_len: u64,
    hash: HashKind,
) -> std::io::Result<ObjectId> {
    use std::os::unix::fs::FileExt as _;
    let mut hasher = Checksum::new(hash);
    // 128 KiB: a 1 MiB buffer's first touch (256 fresh pages, faulted in on this thread while
    // the index is merged on the other) cost more than its fewer reads saved (an import of
    // 10,000 entries, alternated: 53.5 against 50.2 ms; 100,000: 381.9 against 357.9 ms).
    let mut chunk = vec![0u8; 1 << 17];
    each_chunk(lead, lead_len, &mut chunk, "first", |bytes, _| {
        hasher.update(bytes);
        Ok(())
    })?;
    each_chunk(rest, rest_len, &mut chunk, "second", |bytes, at| {
        hasher.update(bytes);
        lead.write_all_at(bytes, lead_len + at)
    })?;
    let pack_hash = hasher.finish();
    lead.write_all_at(pack_hash.as_slice(), lead_len + rest_len)?;
    Ok(pack_hash)
}

/// Reads the first `len` bytes of `file` a chunk at a time, handing each to `f` with its
/// offset; `part` names the pack's part in the error when the file is shorter.
fn each_chunk(
    file: &File,
    len: u64,
    chunk: &mut [u8],
    part: &str,
    mut f: impl FnMut(&[u8], u64) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt as _;
    let mut at = 0u64;
    while at < len {
        let n = file.read_at(chunk, at)?;
        if n == 0 {
            return Err(std::io::Error::other(format!(
                "the pack's {part} part is shorter than written"
            )));
        }
        let n = n.min((len - at) as usize);
        f(&chunk[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

/// A v2 index written up to its trailer: the fan-out, the ids, the CRCs and the offsets.
struct IdxBody {
    tmp: TmpFile,
    out: HashingWriter<BufWriter<File>>,
}

impl IdxBody {
    /// The sorted runs of `rows` merged: ids straight into the index, CRCs and offsets through
    /// two temporary files appended after them. Offsets in the second part are moved past the
    /// first part's `lead_len` bytes.
    fn write(
        pack_dir: &Path,
        hash: HashKind,
        fan: &[u32; 256],
        rows: SortedRuns<44>,
        lead_len: u64,
    ) -> std::io::Result<IdxBody> {
        let width = hash.len_in_bytes();
        let (idx_tmp, idx_file) = TmpFile::create(pack_dir, "tmp_idx")?;
        let (_crc_tmp, crc_file) = TmpFile::create(pack_dir, "tmp_idx_crc")?;
        let (_off_tmp, off_file) = TmpFile::create(pack_dir, "tmp_idx_off")?;
        let mut idx = HashingWriter::new(BufWriter::with_capacity(1 << 16, idx_file), hash);
        let mut crcs = BufWriter::with_capacity(1 << 16, crc_file);
        let mut offs = BufWriter::with_capacity(1 << 16, off_file);
        let mut large: Vec<u64> = Vec::new();
        idx.write_all(b"\xfftOc")?;
        idx.write_all(&2u32.to_be_bytes())?;
        let mut acc = 0u32;
        for f in fan {
            acc += f;
            idx.write_all(&acc.to_be_bytes())?;
        }
        let mut last: Option<[u8; 32]> = None;
        rows.merge(|r: &Row| {
            let id: [u8; 32] = r[..32].try_into().expect("32 bytes");
            if last == Some(id) {
                return Err(std::io::Error::other(format!(
                    "object {} appears twice in one pack",
                    crate::ledger::hash::hex(&id[..width])
                )));
            }
            last = Some(id);
            idx.write_all(&id[..width])?;
            crcs.write_all(&r[40..])?;
            let off = u64::from_be_bytes(r[32..40].try_into().expect("8 bytes"));
            let off = if off & REST_BIT != 0 {
                (off & !REST_BIT) + lead_len
            } else {
                off
            };
            if off > 0x7fff_ffff {
                offs.write_all(&(0x8000_0000u32 | large.len() as u32).to_be_bytes())?;
                large.push(off);
            } else {
                offs.write_all(&(off as u32).to_be_bytes())?;
            }
            Ok(())
        })?;
        for w in [crcs, offs] {
            let f = w.into_inner().map_err(|e| e.into_error())?;
            let mut r = std::io::BufReader::with_capacity(1 << 16, &f);
            use std::io::Seek as _;
            r.seek(std::io::SeekFrom::Start(0))?;
            std::io::copy(&mut r, &mut idx)?;
        }
        for off in large {
            idx.write_all(&off.to_be_bytes())?;
        }
        Ok(IdxBody {
            tmp: idx_tmp,
            out: idx,
        })
    }

    /// Ends the index with the pack's checksum and its own.
    fn seal(mut self, pack_hash: &ObjectId) -> std::io::Result<(TmpFile, File)> {
        self.out.write_all(pack_hash.as_slice())?;
        let (w, h) = self.out.finish();
        let mut f = w.into_inner().map_err(|e| e.into_error())?;
        f.write_all(h.as_slice())?;
        Ok((self.tmp, f))
    }
}

/// A writer that hashes what passes through it.
struct HashingWriter<W: Write> {
    inner: W,
    hasher: Checksum,
}

impl<W: Write> HashingWriter<W> {
    fn new(inner: W, hash: HashKind) -> Self {
        HashingWriter {
            inner,
            hasher: Checksum::new(hash),
        }
    }

    fn finish(self) -> (W, ObjectId) {
        (self.inner, self.hasher.finish())
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::pack::Obj;
    use std::fs;

    fn level() -> Compression {
        Compression::new(1).unwrap()
    }

    /// `n` objects of every kind and many sizes (some deflated, some stored).
    fn sample(hash: HashKind, n: u32) -> Vec<(Obj, Section)> {
        (0..n)
            .map(|i| {
                let kind = [Kind::Blob, Kind::Commit, Kind::Tree][i as usize % 3];
                let data = format!("object {i} {}", "x".repeat((i * 7 % 701) as usize));
                let o = crate::store::codec::object(hash, kind, data.into_bytes()).unwrap();
                let section = if i % 2 == 0 {
                    Section::Lead
                } else {
                    Section::Rest
                };
                (o, section)
            })
            .collect()
    }

    /// A pack streamed into `objects` whose index rows spill every `run_rows`, its writer
    /// changed by `change` before its thread starts.
    fn streaming(objects: &Path, run_rows: usize, change: impl FnOnce(&mut Writer)) -> PackStream {
        let mut w = Writer::create(objects, HashKind::Sha1, level()).unwrap();
        w.rows.run_rows = run_rows;
        change(&mut w);
        PackStream::start(w).unwrap()
    }

    fn names(pack_dir: &Path) -> Vec<String> {
        let mut v: Vec<_> = fs::read_dir(pack_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        v.sort();
        v
    }

    /// Checks through git (`verify-pack`) and through verify's own pack reader that the one
    /// pack in `objects` holds exactly `objs`.
    fn reads_back(root: &Path, objects: &Path, hash: HashKind, objs: &[(Obj, Section)]) {
        let names = names(&objects.join("pack"));
        assert_eq!(names.len(), 2, "only a pack and its index: {names:?}");
        let idx = names.iter().find(|n| n.ends_with(".idx")).unwrap();
        let format = if hash == HashKind::Sha1 {
            "sha1"
        } else {
            "sha256"
        };
        let repo = root.join(format!("repo-{}", &idx[5..15]));
        let init = crate::gitproc::command()
            .args(["init", "-q", "--object-format", format])
            .arg(&repo)
            .output()
            .unwrap();
        assert!(init.status.success());
        for n in &names {
            fs::copy(
                objects.join("pack").join(n),
                repo.join(".git/objects/pack").join(n),
            )
            .unwrap();
        }
        let o = crate::gitproc::in_dir(&repo)
            .args(["verify-pack", "-v"])
            .arg(repo.join(".git/objects/pack").join(idx))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let listed = String::from_utf8_lossy(&o.stdout);
        assert!(
            listed.contains(&format!("non delta: {} objects", objs.len())),
            "{listed}"
        );
        let mut reader =
            crate::store::packread::Reader::new(crate::store::packread::Packs::open(objects, hash));
        let mut buf = Vec::new();
        for (o, _) in objs {
            assert_eq!(reader.read(&o.id, &mut buf), Some(o.kind), "{}", o.id);
            assert!(buf == o.data);
        }
    }

    /// A pack whose index rows spill in many sorted runs reads back whole, written by the
    /// writer alone and streamed through its thread in batches: the same bytes both ways (the
    /// same pack name, which is the checksum of every byte).
    #[test]
    fn a_streamed_pack_with_spilled_index_runs_reads_back() {
        for hash in [HashKind::Sha1, HashKind::Sha256] {
            let dir = tempfile::tempdir().unwrap();
            let objs = sample(hash, 3000);
            let (alone, streamed) = (dir.path().join("alone"), dir.path().join("streamed"));
            let mut w = Writer::create(&alone, hash, level()).unwrap();
            w.rows.run_rows = 64;
            for (o, s) in &objs {
                w.add(&o.id, o.kind, &o.data, *s).unwrap();
            }
            assert!(w.rows.spilled_runs() > 10, "the rows spilled in runs");
            w.finish(false).unwrap().release();
            let mut w = Writer::create(&streamed, hash, level()).unwrap();
            w.rows.run_rows = 64;
            let mut p = PackStream::start(w).unwrap();
            for (o, s) in &objs {
                p.add(&o.id, o.kind, &o.data, *s).unwrap();
            }
            p.finish(false).unwrap().release();
            assert_eq!(names(&alone.join("pack")), names(&streamed.join("pack")));
            assert!(
                objs.iter().map(|(o, _)| o.data.len()).sum::<usize>() > 3 * BATCH_BYTES,
                "the objects went over in several batches"
            );
            reads_back(dir.path(), &alone, hash, &objs);
            reads_back(dir.path(), &streamed, hash, &objs);
        }
    }

    /// `git prune --expire=now` running while an import streams its pack (it deletes every
    /// `tmp_*` file in `objects/pack/`, however new) leaves the pack's temporary files alone:
    /// the pack finishes and git reads it.
    #[test]
    fn a_prune_while_a_pack_streams_leaves_its_temporaries_alone() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let o = crate::gitproc::in_dir(dir.path())
                .args(args)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        };
        git(&["init", "-q"]);
        let objects = dir.path().join(".git/objects");
        let mut p = streaming(&objects, 2, |_| {});
        let mut ids = Vec::new();
        for i in 0..6u8 {
            let o = crate::store::codec::object(HashKind::Sha1, Kind::Blob, vec![i; 40]).unwrap();
            p.add(&o.id, o.kind, &o.data, Section::Rest).unwrap();
            // Sent on at once, so the writer's files are being written while git prunes.
            p.hand_off().unwrap();
            ids.push(o.id);
            git(&["prune", "--expire=now"]);
        }
        p.finish(false).unwrap().release();
        for id in ids {
            git(&["cat-file", "-e", &id.to_string()]);
        }
    }

    /// A pack dropped before it is finished, with batches still on their way to the writer,
    /// leaves no file behind once the drop returns.
    #[test]
    fn an_unfinished_pack_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let objects = dir.path().join("objects");
        let mut p = streaming(&objects, 2, |_| {});
        for (o, s) in &sample(HashKind::Sha1, 3000) {
            p.add(&o.id, o.kind, &o.data, *s).unwrap();
        }
        drop(p);
        assert_eq!(names(&objects.join("pack")), Vec::<String>::new());
    }

    /// An error of the writer's thread comes back to the import (from a later `add` or from
    /// `finish`), and the temporary files are gone: here the pack's first part cannot be
    /// written (a file opened for reading only).
    #[test]
    fn a_write_that_fails_on_the_writers_thread_is_returned_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let objects = dir.path().join("objects");
        let mut p = streaming(&objects, RUN_ROWS, |w| {
            let read_only = File::open(w.lead.0.path()).unwrap();
            w.lead.1 = BufWriter::with_capacity(16, read_only);
        });
        let mut failed = None;
        for (o, s) in &sample(HashKind::Sha1, 3000) {
            if let Err(e) = p.add(&o.id, o.kind, &o.data, *s) {
                failed = Some(e);
                break;
            }
        }
        let e = match failed {
            Some(e) => e,
            None => p.finish(false).unwrap_err(),
        };
        assert_eq!(e.raw_os_error(), Some(libc::EBADF), "{e}");
        assert_eq!(names(&objects.join("pack")), Vec::<String>::new());
    }

    /// The same object added twice is refused when the index is written, and nothing is left.
    #[test]
    fn an_object_added_twice_is_refused_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let objects = dir.path().join("objects");
        let mut p = PackStream::create(&objects, HashKind::Sha256, level()).unwrap();
        let objs = sample(HashKind::Sha256, 10);
        for (o, s) in objs.iter().chain(&objs[3..4]) {
            p.add(&o.id, o.kind, &o.data, *s).unwrap();
        }
        let e = p.finish(false).unwrap_err();
        assert!(e.to_string().contains("appears twice in one pack"), "{e}");
        assert_eq!(names(&objects.join("pack")), Vec::<String>::new());
    }
}
