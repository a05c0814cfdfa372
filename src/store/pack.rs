//! Writing a batch of new objects as one pack plus its v2 index, straight into
//! `objects/pack/` (the verified recipe in `reference/pack-writing.md`).
//!
//! Order matters for crash safety: the pack and index are written under temporary names and
//! fsynced, a `.keep` is created so a concurrent `git repack`/`git gc --prune=now` cannot drop
//! the objects before a ref names them, the pack is renamed and then the index (git and gix
//! discover packs by their index), the directory is fsynced. The caller moves its ref and then
//! calls [`PackGuard::release`] to remove the `.keep`.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use gix::ObjectId;
use gix::hash::Kind as HashKind;
use gix::objs::Kind;
use gix::odb::pack;
use gix::zlib::stream::deflate::{Compress, FlushCompress};
use gix::zlib::{Compression, Status};

use super::checksum::Checksum;
use super::spill::SortedRuns;

/// One object to put in a pack.
#[derive(Clone)]
pub(crate) struct Obj {
    pub(crate) id: ObjectId,
    pub(crate) kind: Kind,
    pub(crate) data: Vec<u8>,
}

/// A written pack whose `.keep` still protects it.
#[derive(Debug)]
pub(crate) struct PackGuard {
    keep: PathBuf,
}

impl PackGuard {
    /// Removes the `.keep` once a ref protects the objects (or the batch was abandoned; the
    /// pack is then garbage that `git gc` removes after its grace period).
    pub(crate) fn release(self) {
        let _ = fs::remove_file(&self.keep);
    }
}

/// Deflates `input` into `out`, reusing the compressor `c` (reset first).
pub(crate) fn deflate(c: &mut Compress, input: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
    c.reset();
    out.clear();
    out.resize(input.len() + input.len() / 1000 + 64, 0);
    let (mut ip, mut op) = (0usize, 0usize);
    loop {
        let (ti, to) = (c.total_in(), c.total_out());
        let st = c
            .compress(&input[ip..], &mut out[op..], FlushCompress::Finish)
            .map_err(|e| std::io::Error::other(format!("deflate: {e}")))?;
        ip += (c.total_in() - ti) as usize;
        op += (c.total_out() - to) as usize;
        match st {
            Status::StreamEnd => break,
            _ if op == out.len() => out.resize(out.len() * 2, 0),
            _ => {}
        }
    }
    out.truncate(op);
    Ok(())
}

fn header_for(kind: Kind) -> pack::data::entry::Header {
    use pack::data::entry::Header;
    match kind {
        Kind::Commit => Header::Commit,
        Kind::Tree => Header::Tree,
        Kind::Blob => Header::Blob,
        Kind::Tag => Header::Tag,
    }
}

type IdxRow = (ObjectId, u64, u32);

fn write_pack_stream(
    objs: &[Obj],
    hash: HashKind,
    level: Compression,
    out: &mut dyn Write,
) -> std::io::Result<(ObjectId, Vec<IdxRow>)> {
    let mut hasher = Checksum::new(hash);
    let count = u32::try_from(objs.len())
        .map_err(|_| std::io::Error::other("too many objects for one pack"))?;
    let header = pack::data::header::encode(pack::data::Version::V2, count);
    out.write_all(&header)?;
    hasher.update(&header);
    let mut offset = header.len() as u64;
    let mut rows = Vec::with_capacity(objs.len());
    let mut comp = Compress::new(level);
    // A ledger tree is one entry: a name and a binary object id, which deflate cannot shrink.
    // Stored (level 0) it is as small, and reading it back needs no Huffman tables, which is
    // most of the cost of inflating an object this small.
    let mut stored = Compress::new(Compression::new(0).expect("level 0 is valid"));
    let (mut zbuf, mut hbuf) = (Vec::with_capacity(64 * 1024), [0u8; 32]);
    for o in objs {
        let hlen = header_for(o.kind).write_to(o.data.len() as u64, &mut &mut hbuf[..])?;
        let c = if o.kind == Kind::Tree {
            &mut stored
        } else {
            &mut comp
        };
        deflate(c, &o.data, &mut zbuf)?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&hbuf[..hlen]);
        crc.update(&zbuf);
        out.write_all(&hbuf[..hlen])?;
        out.write_all(&zbuf)?;
        hasher.update(&hbuf[..hlen]);
        hasher.update(&zbuf);
        rows.push((o.id, offset, crc.finalize()));
        offset += (hlen + zbuf.len()) as u64;
    }
    let pack_hash = hasher.finish();
    out.write_all(pack_hash.as_slice())?;
    Ok((pack_hash, rows))
}

fn encode_idx_v2(
    mut rows: Vec<IdxRow>,
    pack_hash: &ObjectId,
    hash: HashKind,
) -> std::io::Result<Vec<u8>> {
    rows.sort_unstable_by_key(|r| r.0);
    if let Some(w) = rows.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(std::io::Error::other(format!(
            "object {} appears twice in one pack",
            w[0].0
        )));
    }
    let mut out =
        Vec::with_capacity(1032 + rows.len() * (hash.len_in_bytes() + 8) + 2 * hash.len_in_bytes());
    out.extend_from_slice(b"\xfftOc");
    out.extend_from_slice(&2u32.to_be_bytes());
    let mut fan = [0u32; 256];
    for (id, _, _) in &rows {
        fan[id.as_slice()[0] as usize] += 1;
    }
    let mut acc = 0u32;
    for f in fan.iter_mut() {
        acc += *f;
        *f = acc;
    }
    for f in fan {
        out.extend_from_slice(&f.to_be_bytes());
    }
    for (id, _, _) in &rows {
        out.extend_from_slice(id.as_slice());
    }
    for (_, _, crc) in &rows {
        out.extend_from_slice(&crc.to_be_bytes());
    }
    let mut large = Vec::new();
    for (_, off, _) in &rows {
        if *off > 0x7fff_ffff {
            out.extend_from_slice(&(0x8000_0000u32 | large.len() as u32).to_be_bytes());
            large.push(*off);
        } else {
            out.extend_from_slice(&(*off as u32).to_be_bytes());
        }
    }
    for off in large {
        out.extend_from_slice(&off.to_be_bytes());
    }
    out.extend_from_slice(pack_hash.as_slice());
    let mut h = Checksum::new(hash);
    h.update(&out);
    out.extend_from_slice(h.finish().as_slice());
    Ok(out)
}

/// A temporary file's name in `dir`. Never `tmp_*`: `git prune` deletes every such file in
/// `objects/pack/` (with `--expire=now`, however new), which would make a batch or an import
/// racing it fail.
fn tmp_name(dir: &Path, prefix: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    dir.join(format!("forum_{prefix}_{}_{nanos}", std::process::id()))
}

/// Writes `objs` (already deduplicated, commits first) as one pack in `objects_dir/pack`.
/// `durable` fsyncs the pack, the index and the directory.
pub(crate) fn write_pack(
    objects_dir: &Path,
    hash: HashKind,
    objs: &[Obj],
    level: Compression,
    durable: bool,
) -> std::io::Result<PackGuard> {
    let pack_dir = objects_dir.join("pack");
    fs::create_dir_all(&pack_dir)?;
    let tmp_pack = tmp_name(&pack_dir, "tmp_pack");
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp_pack)?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let written = write_pack_stream(objs, hash, level, &mut w);
    let (pack_hash, rows) = match written {
        Ok(v) => v,
        Err(e) => {
            drop(w);
            let _ = fs::remove_file(&tmp_pack);
            return Err(e);
        }
    };
    let f = w.into_inner().map_err(|e| e.into_error())?;
    if durable {
        f.sync_all()?;
    }
    drop(f);
    let tmp_idx = tmp_name(&pack_dir, "tmp_idx");
    let mut fi = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp_idx)?;
    fi.write_all(&encode_idx_v2(rows, &pack_hash, hash)?)?;
    if durable {
        fi.sync_all()?;
    }
    drop(fi);
    install(&pack_dir, &tmp_pack, &tmp_idx, &pack_hash, durable)
}

/// Moves a written pack and its index into place under their names, behind a `.keep`.
fn install(
    pack_dir: &Path,
    tmp_pack: &Path,
    tmp_idx: &Path,
    pack_hash: &ObjectId,
    durable: bool,
) -> std::io::Result<PackGuard> {
    let base = pack_dir.join(format!("pack-{}", pack_hash.to_hex()));
    let (pack, idx, keep) = (
        base.with_extension("pack"),
        base.with_extension("idx"),
        base.with_extension("keep"),
    );
    fs::write(
        &keep,
        format!(
            "git-forum: ledger append in progress (pid {})\n",
            std::process::id()
        ),
    )?;
    if idx.exists() {
        let _ = fs::remove_file(tmp_pack);
        let _ = fs::remove_file(tmp_idx);
    } else {
        fs::rename(tmp_pack, &pack)?;
        fs::rename(tmp_idx, &idx)?;
    }
    if durable {
        File::open(pack_dir)?.sync_all()?;
    }
    Ok(PackGuard { keep })
}

/// Number of pack indices in `objects_dir/pack`.
pub(crate) fn pack_count(objects_dir: &Path) -> usize {
    fs::read_dir(objects_dir.join("pack"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().ends_with(".idx"))
                .count()
        })
        .unwrap_or(0)
}

/// Which part of a streamed pack an object goes to: the commits lead the pack (a walk reads
/// them one after another), the trees and bodies follow in the order they were added.
#[derive(Clone, Copy, PartialEq, Eq)]
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
            let _ = fs::remove_file(p);
        }
    }
}

/// A pack written object by object, for imports too large to hold: each object is deflated
/// and written as it comes, and only its index row is kept (sorted runs of rows spill to a
/// temporary file, merged into the `.idx` at the end). The object count in the header and the
/// trailing checksum are filled in by [`PackStream::finish`], which reads the pack back once.
/// Dropped unfinished, it leaves nothing behind.
pub(crate) struct PackStream {
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

impl PackStream {
    /// Starts a pack in `objects_dir/pack`, deflating blobs at `level` (trees and commits are
    /// stored).
    pub(crate) fn create(
        objects_dir: &Path,
        hash: HashKind,
        level: Compression,
    ) -> std::io::Result<PackStream> {
        let pack_dir = objects_dir.join("pack");
        fs::create_dir_all(&pack_dir)?;
        let (lt, lf) = TmpFile::create(&pack_dir, "tmp_pack")?;
        let (rt, rf) = TmpFile::create(&pack_dir, "tmp_pack_rest")?;
        let mut lead = BufWriter::with_capacity(1 << 20, lf);
        // The header, its count written at the end.
        let header = pack::data::header::encode(pack::data::Version::V2, 0);
        lead.write_all(&header)?;
        Ok(PackStream {
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

    fn width(&self) -> usize {
        self.hash.len_in_bytes()
    }

    /// Completes the pack and its index and moves them into place behind a `.keep`.
    /// `durable` fsyncs both and the directory.
    pub(crate) fn finish(mut self, durable: bool) -> std::io::Result<PackGuard> {
        let count = u32::try_from(self.count)
            .map_err(|_| std::io::Error::other("too many objects for one pack"))?;
        // The lead: its header gets the count, then the rest is appended, hashing all of it.
        let (lead_tmp, lead) = (&self.lead.0, &mut self.lead.1);
        lead.flush()?;
        self.rest.1.flush()?;
        let lead_file = lead.get_mut();
        use std::os::unix::fs::FileExt as _;
        lead_file.write_all_at(
            &pack::data::header::encode(pack::data::Version::V2, count),
            0,
        )?;
        let mut hasher = Checksum::new(self.hash);
        let mut chunk = vec![0u8; 1 << 20];
        let mut at = 0u64;
        while at < self.lead_len {
            let n = lead_file.read_at(&mut chunk, at)?;
            if n == 0 {
                return Err(std::io::Error::other(format!(
                    "{} is shorter than written",
                    lead_tmp.path().display()
                )));
            }
            let n = n.min((self.lead_len - at) as usize);
            hasher.update(&chunk[..n]);
            at += n as u64;
        }
        let rest_file = self.rest.1.get_ref();
        let mut at = 0u64;
        while at < self.rest_len {
            let n = rest_file.read_at(&mut chunk, at)?;
            if n == 0 {
                return Err(std::io::Error::other(
                    "the pack's second part is shorter than written",
                ));
            }
            let n = n.min((self.rest_len - at) as usize);
            hasher.update(&chunk[..n]);
            lead_file.write_all_at(&chunk[..n], self.lead_len + at)?;
            at += n as u64;
        }
        let pack_hash = hasher.finish();
        lead_file.write_all_at(pack_hash.as_slice(), self.lead_len + self.rest_len)?;
        if durable {
            lead_file.sync_all()?;
        }
        drop(chunk);
        let (idx_tmp, idx) = self.write_idx(&pack_hash)?;
        if durable {
            idx.sync_all()?;
        }
        drop(idx);
        let guard = install(
            &self.pack_dir,
            self.lead.0.path(),
            idx_tmp.path(),
            &pack_hash,
            durable,
        )?;
        // Renamed (or, when the same pack already existed, removed): nothing to clean up.
        self.lead.0.path = None;
        let mut idx_tmp = idx_tmp;
        idx_tmp.path = None;
        Ok(guard)
    }

    /// Writes the v2 index: the sorted runs merged, ids straight into the index, CRCs and
    /// offsets through two temporary files appended after them.
    fn write_idx(&mut self, pack_hash: &ObjectId) -> std::io::Result<(TmpFile, File)> {
        let width = self.width();
        let rest_base = self.lead_len;
        let (idx_tmp, idx_file) = TmpFile::create(&self.pack_dir, "tmp_idx")?;
        let (crc_tmp, crc_file) = TmpFile::create(&self.pack_dir, "tmp_idx_crc")?;
        let (off_tmp, off_file) = TmpFile::create(&self.pack_dir, "tmp_idx_off")?;
        let mut idx = HashingWriter::new(BufWriter::with_capacity(1 << 16, idx_file), self.hash);
        let mut crcs = BufWriter::with_capacity(1 << 16, crc_file);
        let mut offs = BufWriter::with_capacity(1 << 16, off_file);
        let mut large: Vec<u64> = Vec::new();
        idx.write_all(b"\xfftOc")?;
        idx.write_all(&2u32.to_be_bytes())?;
        let mut acc = 0u32;
        for f in self.fan {
            acc += f;
            idx.write_all(&acc.to_be_bytes())?;
        }
        let mut last: Option<[u8; 32]> = None;
        let rows = std::mem::replace(&mut self.rows, SortedRuns::new(&self.pack_dir, 1));
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
                (off & !REST_BIT) + rest_base
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
        for (tmp, w) in [(&crc_tmp, crcs), (&off_tmp, offs)] {
            let f = w.into_inner().map_err(|e| e.into_error())?;
            let mut r = std::io::BufReader::with_capacity(1 << 16, &f);
            use std::io::Seek as _;
            r.seek(std::io::SeekFrom::Start(0))?;
            let copied = std::io::copy(&mut r, &mut idx)?;
            let _ = (tmp, copied);
        }
        for off in large {
            idx.write_all(&off.to_be_bytes())?;
        }
        idx.write_all(pack_hash.as_slice())?;
        let (w, h) = idx.finish()?;
        let mut f = w.into_inner().map_err(|e| e.into_error())?;
        f.write_all(h.as_slice())?;
        Ok((idx_tmp, f))
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

    fn finish(self) -> std::io::Result<(W, ObjectId)> {
        let h = self.hasher.finish();
        Ok((self.inner, h))
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

    /// A streamed pack whose index rows spill in many sorted runs reads back whole, through
    /// git (`verify-pack`) and through verify's own pack reader.
    #[test]
    fn a_streamed_pack_with_spilled_index_runs_reads_back() {
        for hash in [HashKind::Sha1, HashKind::Sha256] {
            let dir = tempfile::tempdir().unwrap();
            let objects = dir.path().join("objects");
            fs::create_dir_all(&objects).unwrap();
            let level = Compression::new(1).unwrap();
            let mut p = PackStream::create(&objects, hash, level).unwrap();
            p.rows.run_rows = 64;
            let objs: Vec<Obj> = (0..1000u32)
                .map(|i| {
                    let kind = [Kind::Blob, Kind::Commit, Kind::Tree][i as usize % 3];
                    let data = format!("object {i} {}", "x".repeat((i % 97) as usize)).into_bytes();
                    crate::store::codec::object(hash, kind, data).unwrap()
                })
                .collect();
            for (i, o) in objs.iter().enumerate() {
                let section = if i % 2 == 0 {
                    Section::Lead
                } else {
                    Section::Rest
                };
                p.add(&o.id, o.kind, &o.data, section).unwrap();
            }
            assert!(p.rows.spilled_runs() > 10, "the rows spilled in runs");
            p.finish(false).unwrap().release();
            let names: Vec<_> = fs::read_dir(objects.join("pack"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                .collect();
            assert_eq!(
                names.len(),
                2,
                "only the pack and its index are left: {names:?}"
            );
            let idx = names.iter().find(|n| n.ends_with(".idx")).unwrap();
            let kind = if hash == HashKind::Sha1 {
                "sha1"
            } else {
                "sha256"
            };
            let repo = dir.path().join("repo");
            let init = crate::gitproc::command()
                .args(["init", "-q", "--object-format", kind])
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
            assert!(listed.contains("non delta: 1000 objects"), "{listed}");
            let mut reader = crate::store::packread::Reader::new(
                crate::store::packread::Packs::open(&objects, hash),
            );
            let mut buf = Vec::new();
            for o in &objs {
                assert_eq!(reader.read(&o.id, &mut buf), Some(o.kind), "{}", o.id);
                assert!(buf == o.data);
            }
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
        let mut p =
            PackStream::create(&objects, HashKind::Sha1, Compression::new(1).unwrap()).unwrap();
        p.rows.run_rows = 2;
        let mut ids = Vec::new();
        for i in 0..6u8 {
            let o = crate::store::codec::object(HashKind::Sha1, Kind::Blob, vec![i; 40]).unwrap();
            p.add(&o.id, o.kind, &o.data, Section::Rest).unwrap();
            ids.push(o.id);
            git(&["prune", "--expire=now"]);
        }
        p.finish(false).unwrap().release();
        for id in ids {
            git(&["cat-file", "-e", &id.to_string()]);
        }
    }

    /// A pack dropped before it is finished leaves no file behind.
    #[test]
    fn an_unfinished_pack_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let objects = dir.path().join("objects");
        let mut p =
            PackStream::create(&objects, HashKind::Sha1, Compression::new(1).unwrap()).unwrap();
        p.rows.run_rows = 2;
        for i in 0..5u8 {
            let o = crate::store::codec::object(HashKind::Sha1, Kind::Blob, vec![i]).unwrap();
            p.add(&o.id, o.kind, &o.data, Section::Rest).unwrap();
        }
        drop(p);
        assert_eq!(fs::read_dir(objects.join("pack")).unwrap().count(), 0);
    }
}
