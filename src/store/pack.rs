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

mod stream;
pub(crate) use stream::{PackStream, Section};

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
