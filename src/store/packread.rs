//! Whole-object reads from the repository's packs for `verify --deep`, inflated with
//! libdeflate.
//!
//! A deep verify inflates every commit, tree and body of the ledger once, and most of them are
//! small (a few hundred bytes), where the cost is dominated by setting up each zlib stream's
//! Huffman tables. libdeflate does that markedly faster than the streaming inflater gix uses
//! (measured on a 100,000-entry ledger's commits: 0.33 s against 0.52 s), so verify reads
//! whole, undeltified objects from the pack files itself. Anything else (a delta, a loose
//! object, an object in an alternate or a pack that appeared after the reader was opened) goes
//! through gix as before. Nothing read here is trusted: the caller hashes every object it reads
//! and compares the result with the id it asked for.
//!
//! Finding an object costs more than inflating it: a binary search of the index (17 steps
//! for 100,000 entries' 300,001 objects, each a cache miss in an 8 MiB index) and another
//! over the sorted offsets for where the entry ends came to a quarter of a 100,000-entry deep
//! verify's CPU time in a profile. But verify asks for objects in the order a batch pack holds
//! them: the walk reads each commit's parent, which sits just before it, and a worker reads a
//! tree, its blob just after it, then the previous entry's tree and blob just before those. So
//! each pack also keeps its entries' ids in pack order, and a reader remembers where its last
//! two reads were: an object is first looked for a few entries either side of them (one 20- or
//! 32-byte compare each, of ids held side by side), and only then through the index.
//!
//! Large pack files are read with positioned reads into a few windows per thread rather than
//! mapped: pages of a mapping count towards the process's resident set once touched, so a
//! verify that reads every object of a large pack would hold the whole pack resident (60 MiB
//! for 100,000 distinct bodies). Windows bound that to 1 MiB per thread, and the kernel's page
//! cache serves the reads just as well. Packs of at most [`MAP_BYTES`] together are mapped
//! instead, once for every thread: each thread's windows would be fresh memory, zeroed, faulted
//! in and filled by a copy of pages the cache already holds, which for a 10,000-entry ledger
//! cost more than the mapping's few faults (a profile of a cold deep verify there put a tenth
//! of its CPU in faulting in fresh pages and copying reads, most of it the windows).

use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::sync::Arc;

use gix::ObjectId;
use gix::hash::Kind as HashKind;
use gix::objs::Kind;
use gix::odb::pack::index;

/// Objects larger than this are left to gix (a ledger's bodies are capped well below it).
pub(crate) const MAX_OBJECT_BYTES: usize = 2 * crate::ledger::MAX_PAYLOAD_BYTES;
/// The size of one read from a pack file.
const WINDOW: u64 = 64 << 10;
/// How many windows a reader keeps. A batch pack holds the commits, then the trees, then the
/// bodies, each in order of first use, so checking entries one after another reads several
/// regions in step: the current entries' trees and bodies, and those of earlier entries whose
/// bodies these repeat. With too few windows for the regions in play, each evicts the next.
const WINDOWS: usize = 16;
/// Packs of at most this many bytes together are mapped rather than read through windows.
const MAP_BYTES: u64 = 32 << 20;

/// Where, relative to a recent read's position in pack order, the next object is looked for
/// first: the parent commit just before, the blob just after its tree, the previous entry's
/// tree three before that blob.
const NEAR: [isize; 6] = [-1, 1, -3, -2, 2, 3];

/// One pack: its index, its data file, and where each entry ends.
struct Pack {
    index: index::File,
    data: File,
    /// The whole file, mapped, when the packs are small enough ([`MAP_BYTES`]).
    map: Option<memmap2::Mmap>,
    /// Every entry's offset, ascending: an entry ends where the next one starts.
    offsets: Vec<u64>,
    /// The id of the entry at each place in `offsets` (pack order), `width` bytes each, so a
    /// look for an object near a recent read compares ids that sit next to each other rather
    /// than reaching into the index, sorted by id, once per read (a cache miss each: with only
    /// a four-byte prefix kept here, the full compare against the index was 10 % of a 100k
    /// deep verify's CPU time). 20 bytes an object, 6 MiB for a 100,000-entry ledger.
    ids: Vec<u8>,
    width: usize,
    /// Where the last entry ends (the trailing checksum follows).
    end: u64,
}

/// The packs present when verify started, shared by its threads.
#[derive(Clone, Default)]
pub(crate) struct Packs(Arc<Vec<Pack>>);

impl Packs {
    /// Opens every `*.idx` with its pack under `objects/pack`. A pack that cannot be opened is
    /// skipped: its objects are then read through gix, which reports any real problem.
    pub(crate) fn open(objects_dir: &Path, hash: HashKind) -> Packs {
        Packs::open_mapping(objects_dir, hash, MAP_BYTES)
    }

    /// [`Packs::open`], mapping the packs when they come to at most `map_bytes` together.
    fn open_mapping(objects_dir: &Path, hash: HashKind, map_bytes: u64) -> Packs {
        let Ok(dir) = std::fs::read_dir(objects_dir.join("pack")) else {
            return Packs::default();
        };
        let packs = dir
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "idx"))
            .filter_map(|p| {
                let index = index::File::at(&p, hash).ok()?;
                let data = File::open(p.with_extension("pack")).ok()?;
                let len = data.metadata().ok()?.len();
                let end = len.checked_sub(hash.len_in_bytes() as u64)?;
                let width = hash.len_in_bytes();
                let (offsets, ids) = pack_order(&index, end, width);
                Some(Pack {
                    index,
                    data,
                    map: None,
                    offsets,
                    ids,
                    width,
                    end,
                })
            })
            .collect::<Vec<_>>();
        Packs(Arc::new(mapped_when_small(packs, map_bytes)))
    }
}

/// `packs`, each mapped when all of them together are at most `map_bytes`. A pack that cannot be
/// mapped is read through windows.
#[allow(unsafe_code)]
fn mapped_when_small(mut packs: Vec<Pack>, map_bytes: u64) -> Vec<Pack> {
    if packs.iter().map(|p| p.end).sum::<u64>() <= map_bytes {
        for p in &mut packs {
            // SAFETY: git writes a pack whole under a temporary name and never changes it once
            // it has its name (a repack writes new files and removes old ones, which leaves a
            // mapping intact), as gix and git themselves rely on when they map packs. Every
            // read of the mapping is bounds-checked against its length, and nothing read is
            // trusted: each object is hashed against the id it was asked for.
            p.map = unsafe { memmap2::Mmap::map(&p.data) }.ok();
        }
    }
    packs
}

/// Every entry's offset in ascending order, and the ids of `index` in that order, `width`
/// bytes each. In a pack under 4 GiB with fewer than 2^32 objects (every ledger), each entry is
/// one 8-byte key, its offset above its index position, sorted by offset with
/// [`radix_sort_high`]; the keys then become the offsets in place. Compared with sorting
/// 16-byte (offset, position) pairs into new arrays, that moves half the bytes and touches
/// about a third less fresh memory (page faults were over a quarter of this step's time), and
/// this step runs before the walk can start. Larger packs sort pairs.
fn pack_order(index: &index::File, end: u64, width: usize) -> (Vec<u64>, Vec<u8>) {
    let n = index.num_objects();
    // An offset at or past the end (a damaged index) would not fit its key: such an index takes
    // the general path, as every index did before.
    let keys: Option<Vec<u64>> = (end <= u64::from(u32::MAX))
        .then(|| {
            (0..n)
                .map(|i| {
                    let o = index.pack_offset_at_index(i);
                    (o < end).then_some((o << 32) | u64::from(i))
                })
                .collect()
        })
        .flatten();
    let Some(keys) = keys else {
        let by_offset: Vec<(u64, u32)> =
            (0..n).map(|i| (index.pack_offset_at_index(i), i)).collect();
        let sorted = sort_by_offset(by_offset, end);
        let ids = ids_in_pack_order(index, sorted.iter().map(|p| p.1), width);
        return (sorted.iter().map(|p| p.0).collect(), ids);
    };
    let mut keys = radix_sort_high(keys, end);
    let ids = ids_in_pack_order(index, keys.iter().map(|k| *k as u32), width);
    for k in &mut keys {
        *k >>= 32;
    }
    (keys, ids)
}

/// The ids of `index`, `width` bytes each, in pack order (`by_offset` gives the index position
/// of each entry in ascending order of offset). The index is read in its own order and each id
/// written to its place, rather than each id read from its place in pack order: the ids sit
/// sorted by id in the index, so reading them in pack order was a cache miss per object (a
/// 100,000-entry deep verify spent 8 % of its CPU here, before its walk could start), where
/// writes to scattered places do not hold up the next read.
fn ids_in_pack_order(
    index: &index::File,
    by_offset: impl ExactSizeIterator<Item = u32>,
    width: usize,
) -> Vec<u8> {
    let mut place = vec![0u32; by_offset.len()];
    for (q, i) in by_offset.enumerate() {
        place[i as usize] = q as u32;
    }
    let mut ids = vec![0u8; place.len() * width];
    for (i, &q) in place.iter().enumerate() {
        let at = q as usize * width;
        ids[at..at + width].copy_from_slice(index.oid_at_index(i as u32).as_bytes());
    }
    ids
}

/// Bits sorted per pass of the radix sorts.
const RADIX_BITS: u32 = 11;

/// `keys` (each an offset below `end` in its upper 32 bits, anything in its lower 32) in
/// ascending order of their upper halves; keys of one offset keep their order. Offsets in a pack
/// are distinct, so this is the order a comparison sort gives. Least significant digit first,
/// 11 bits a pass, with every pass's counts taken in one read of the keys.
fn radix_sort_high(mut keys: Vec<u64>, end: u64) -> Vec<u64> {
    const BUCKETS: usize = 1 << RADIX_BITS;
    let passes = ((u64::BITS - end.leading_zeros()).div_ceil(RADIX_BITS)) as usize;
    let digit =
        |k: u64, pass: usize| ((k >> (32 + pass as u32 * RADIX_BITS)) as usize) & (BUCKETS - 1);
    let mut counts = vec![[0usize; BUCKETS]; passes];
    for &k in &keys {
        for (pass, c) in counts.iter_mut().enumerate() {
            c[digit(k, pass)] += 1;
        }
    }
    let mut other = vec![0u64; keys.len()];
    for (pass, c) in counts.iter().enumerate() {
        let mut starts = [0usize; BUCKETS];
        let mut sum = 0;
        for (s, n) in starts.iter_mut().zip(c) {
            *s = sum;
            sum += n;
        }
        for &k in &keys {
            let d = digit(k, pass);
            other[starts[d]] = k;
            starts[d] += 1;
        }
        std::mem::swap(&mut keys, &mut other);
    }
    keys
}

/// `pairs` of (offset, index position) in ascending order of offset, every offset below
/// `end`. Offsets in one pack are distinct, so the order is the one a comparison sort gives.
/// A least-significant-digit radix sort, 11 bits a pass (three passes for a pack under 8 GiB):
/// the comparison sort of a 100,000-entry ledger's 300,001 objects was 2.4 % of its deep
/// verify, before the walk could start. Used for packs of 4 GiB and more ([`pack_order`]).
fn sort_by_offset(mut pairs: Vec<(u64, u32)>, end: u64) -> Vec<(u64, u32)> {
    const BUCKETS: usize = 1 << RADIX_BITS;
    let passes = (u64::BITS - end.leading_zeros()).div_ceil(RADIX_BITS);
    let mut other = vec![(0u64, 0u32); pairs.len()];
    for pass in 0..passes {
        let shift = pass * RADIX_BITS;
        let digit = |o: u64| ((o >> shift) as usize) & (BUCKETS - 1);
        let mut starts = vec![0usize; BUCKETS + 1];
        for &(o, _) in &pairs {
            starts[digit(o) + 1] += 1;
        }
        for b in 0..BUCKETS {
            starts[b + 1] += starts[b];
        }
        for &p in &pairs {
            let d = digit(p.0);
            other[starts[d]] = p;
            starts[d] += 1;
        }
        std::mem::swap(&mut pairs, &mut other);
    }
    pairs
}

/// A stretch of one pack file, as last read.
struct Window {
    pack: usize,
    start: u64,
    bytes: Vec<u8>,
}

impl Window {
    fn covers(&self, pack: usize, from: u64, to: u64) -> bool {
        self.pack == pack && self.start <= from && to <= self.start + self.bytes.len() as u64
    }
}

/// One thread's reader: the shared packs, its windows and its own decompressor.
pub(crate) struct Reader {
    packs: Packs,
    windows: Windows,
    inflater: libdeflater::Decompressor,
    /// Where the last two objects read were, as (pack, place in pack order), latest first.
    recent: [(usize, usize); 2],
}

impl Reader {
    pub(crate) fn new(packs: Packs) -> Reader {
        Reader {
            packs,
            windows: Windows {
                held: Vec::with_capacity(WINDOWS),
                misses: [(usize::MAX, 0); 8],
                next_miss: 0,
                single: Vec::new(),
                read_bytes: 0,
            },
            inflater: libdeflater::Decompressor::new(),
            recent: [(usize::MAX, 0); 2],
        }
    }

    /// Where object `id` is, as (pack, place in pack order): near a recent read when it is
    /// there, else through the indexes.
    fn find(&self, id: &ObjectId) -> Option<(usize, usize)> {
        let packs = &self.packs.0;
        let want = id.as_slice();
        for &(k, at) in &self.recent {
            let Some(pack) = packs.get(k) else { continue };
            let w = pack.width;
            for d in NEAR {
                let Some(q) = at.checked_add_signed(d) else {
                    continue;
                };
                if pack.ids.get(q * w..(q + 1) * w) == Some(want) {
                    return Some((k, q));
                }
            }
        }
        for (k, pack) in packs.iter().enumerate() {
            let Some(i) = pack.index.lookup(id) else {
                continue;
            };
            let offset = pack.index.pack_offset_at_index(i);
            return Some((k, pack.offsets.partition_point(|&o| o < offset)));
        }
        None
    }

    /// Reads object `id` into `buf` when a pack holds it whole. `None` means "ask gix": the
    /// object is not in these packs, is stored as a delta, or its entry cannot be read or does
    /// not inflate to its recorded size.
    pub(crate) fn read(&mut self, id: &ObjectId, buf: &mut Vec<u8>) -> Option<Kind> {
        let (k, q) = self.find(id)?;
        self.recent = [(k, q), self.recent[0]];
        let pack = &self.packs.0[k];
        let offset = *pack.offsets.get(q)?;
        let end = pack.offsets.get(q + 1).copied().unwrap_or(pack.end);
        if end <= offset || end - offset > MAX_OBJECT_BYTES as u64 + 64 {
            return None;
        }
        let entry = self.windows.bytes(k, pack, offset, end)?;
        let (kind, size, header) = entry_header(entry)?;
        if size > MAX_OBJECT_BYTES {
            return None;
        }
        // A buffer already as long is cut to size rather than cleared and zeroed again: the
        // object is accepted only when the inflater wrote all `size` bytes (zeroing, 1.3 % of
        // a cold 100,000-entry deep verify's CPU samples, was about half of it here).
        if buf.len() < size {
            buf.resize(size, 0);
        } else {
            buf.truncate(size);
        }
        match self.inflater.zlib_decompress(&entry[header..], buf) {
            Ok(n) if n == size => Some(kind),
            _ => None,
        }
    }
}

/// A reader's view of the pack files: the windows it holds and what it read outside them.
struct Windows {
    /// Most recently used first.
    held: Vec<Window>,
    /// Where the last few entries read outside every window were (pack, offset): a miss near
    /// one of them starts a run of neighbouring reads and gets a window; any other miss reads
    /// its entry alone (a body shared by many entries sits wherever it was first written, and
    /// a whole window for it would be mostly wasted).
    misses: [(usize, u64); 8],
    next_miss: usize,
    /// The last entry read alone.
    single: Vec<u8>,
    /// Bytes read from pack files so far.
    read_bytes: u64,
}

impl Windows {
    /// Bytes `from..to` of pack `k`: from a window that holds them, from a window read now
    /// when the read looks like part of a run, or read alone. `None` when the pack cannot be
    /// read there.
    fn bytes<'a>(&'a mut self, k: usize, pack: &'a Pack, from: u64, to: u64) -> Option<&'a [u8]> {
        if let Some(map) = &pack.map {
            return map.get(usize::try_from(from).ok()?..usize::try_from(to).ok()?);
        }
        let slice = |w: &Window| {
            let at = (from - w.start) as usize;
            at..at + (to - from) as usize
        };
        if let Some(i) = self.held.iter().position(|w| w.covers(k, from, to)) {
            // Moved to the front by a rotation of the windows before it (a swap for the one
            // behind the front, where the reads of trees and of bodies alternate).
            self.held[..=i].rotate_right(1);
            let w = &self.held[0];
            return Some(&w.bytes[slice(w)]);
        }
        let near = |p: usize, at: u64| p == k && at.abs_diff(from) <= 2 * WINDOW;
        let run = self.misses.iter().any(|&(p, at)| near(p, at))
            || self
                .held
                .iter()
                .any(|w| near(w.pack, w.start) || near(w.pack, w.start + w.bytes.len() as u64));
        self.misses[self.next_miss] = (k, from);
        self.next_miss = (self.next_miss + 1) % self.misses.len();
        if !run {
            self.single.resize((to - from) as usize, 0);
            self.read_bytes += to - from;
            pack.data.read_exact_at(&mut self.single, from).ok()?;
            return Some(&self.single);
        }
        let start = from - from % WINDOW;
        let stop = (start + WINDOW).max(to).min(pack.end);
        let mut win = if self.held.len() == WINDOWS {
            self.held.pop().expect("full")
        } else {
            Window {
                pack: k,
                start,
                bytes: Vec::new(),
            }
        };
        win.pack = k;
        win.start = start;
        win.bytes.resize((stop - start) as usize, 0);
        self.read_bytes += stop - start;
        if pack.data.read_exact_at(&mut win.bytes, start).is_err() {
            // Kept for its buffer, but empty, so it holds nothing.
            win.bytes.clear();
            self.held.push(win);
            return None;
        }
        self.held.insert(0, win);
        let w = &self.held[0];
        Some(&w.bytes[slice(w)])
    }
}

/// A pack entry's object kind, inflated size and header length, when it stores an object
/// whole (a delta, or a header that does not parse, gives `None`).
pub(crate) fn entry_header(entry: &[u8]) -> Option<(Kind, usize, usize)> {
    let mut c = *entry.first()?;
    let kind = match (c >> 4) & 7 {
        1 => Kind::Commit,
        2 => Kind::Tree,
        3 => Kind::Blob,
        4 => Kind::Tag,
        _ => return None,
    };
    let mut size = (c & 15) as u64;
    let mut shift = 4;
    let mut i = 1;
    while c & 0x80 != 0 {
        c = *entry.get(i)?;
        if shift > 57 {
            return None;
        }
        size |= ((c & 0x7f) as u64) << shift;
        shift += 7;
        i += 1;
    }
    Some((kind, usize::try_from(size).ok()?, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_read_whole_from_a_pack_through_the_windows() {
        let dir = tempfile::tempdir().unwrap();
        let objects = dir.path().join("objects");
        std::fs::create_dir_all(&objects).unwrap();
        let hash = HashKind::Sha1;
        // Enough objects, some larger than a window, that reads cross window edges and the
        // windows get reused.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let objs: Vec<_> = (0..400)
            .map(|i| {
                let len = if i % 50 == 0 { 300_000 } else { 2_000 + i * 7 };
                let data: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        b'a' + (x % 16) as u8
                    })
                    .collect();
                let kind = [Kind::Blob, Kind::Commit, Kind::Tree][i % 3];
                crate::store::git::object(hash, kind, data).unwrap()
            })
            .collect();
        let level = gix::zlib::Compression::new(6).unwrap();
        crate::store::pack::write_pack(&objects, hash, &objs, level, false)
            .unwrap()
            .release();
        let mut reader = Reader::new(Packs::open_mapping(&objects, hash, 0));
        assert!(reader.packs.0.iter().all(|p| p.map.is_none()));
        let mut buf = Vec::new();
        // Backwards, as verify walks, then forwards.
        for o in objs.iter().rev().chain(objs.iter()) {
            assert_eq!(reader.read(&o.id, &mut buf), Some(o.kind), "{}", o.id);
            assert!(buf == o.data, "{} reads back as written", o.id);
        }
        assert!(reader.windows.held.len() <= WINDOWS);

        // Six regions read in step, as verify reads a batch pack's trees and bodies along
        // with those of earlier entries that later ones repeat: each region's bytes are read
        // about once, not once per switch between regions.
        let mut reader = Reader::new(Packs::open_mapping(&objects, hash, 0));
        let small: Vec<_> = objs.iter().filter(|o| o.data.len() < 10_000).collect();
        let stride = small.len() / 6;
        for step in (0..stride).rev() {
            for region in 0..6 {
                let o = small[region * stride + step];
                assert_eq!(reader.read(&o.id, &mut buf), Some(o.kind));
            }
        }
        let pack_len: u64 = reader.packs.0.iter().map(|p| p.end).sum();
        assert!(
            reader.windows.read_bytes < 2 * pack_len,
            "read {} bytes of a {pack_len}-byte pack",
            reader.windows.read_bytes
        );
        let missing = crate::store::git::object(hash, Kind::Blob, b"absent".to_vec()).unwrap();
        assert_eq!(reader.read(&missing.id, &mut buf), None);

        // The same pack mapped (it is under `MAP_BYTES`): every object reads back as written,
        // in both orders, and no window is read.
        let mut reader = Reader::new(Packs::open(&objects, hash));
        assert!(reader.packs.0.iter().all(|p| p.map.is_some()));
        for o in objs.iter().rev().chain(objs.iter()) {
            assert_eq!(reader.read(&o.id, &mut buf), Some(o.kind), "{}", o.id);
            assert!(buf == o.data, "{} reads back as written", o.id);
        }
        assert_eq!(reader.windows.read_bytes, 0);
        assert!(reader.windows.held.is_empty());
        assert_eq!(reader.read(&missing.id, &mut buf), None);
        // Packs larger than that together are read through windows.
        let pack_len: u64 = reader.packs.0.iter().map(|p| p.end).sum();
        let reader = Reader::new(Packs::open_mapping(&objects, hash, pack_len - 1));
        assert!(reader.packs.0.iter().all(|p| p.map.is_none()));
    }

    /// Objects are found next to the last reads when they sit there, through the index
    /// otherwise, in whichever pack holds them: reads that hop between two packs, or to an
    /// object far from the last ones, or to one no pack holds, all answer rightly.
    #[test]
    fn objects_are_found_near_the_last_reads_and_through_the_index() {
        for hash in [HashKind::Sha1, HashKind::Sha256] {
            let dir = tempfile::tempdir().unwrap();
            let objects = dir.path().join("objects");
            std::fs::create_dir_all(&objects).unwrap();
            let level = gix::zlib::Compression::new(6).unwrap();
            let packs: Vec<Vec<_>> = (0..2)
                .map(|p| {
                    let objs: Vec<_> = (0..60)
                        .map(|i| {
                            let kind = [Kind::Commit, Kind::Tree, Kind::Blob][i % 3];
                            let data = format!("pack {p} object {i}").into_bytes();
                            crate::store::git::object(hash, kind, data).unwrap()
                        })
                        .collect();
                    crate::store::pack::write_pack(&objects, hash, &objs, level, false)
                        .unwrap()
                        .release();
                    objs
                })
                .collect();
            let mut reader = Reader::new(Packs::open(&objects, hash));
            let mut buf = Vec::new();
            let mut check = |o: &crate::store::pack::Obj, reader: &mut Reader| {
                assert_eq!(reader.read(&o.id, &mut buf), Some(o.kind), "{}", o.id);
                assert!(buf == o.data, "{} reads back as written", o.id);
            };
            // Backwards through one pack, as the walk goes; then alternating between the two
            // packs; then in strides that no neighbour check reaches.
            for o in packs[0].iter().rev() {
                check(o, &mut reader);
            }
            for i in 0..60 {
                check(&packs[i % 2][i], &mut reader);
            }
            for i in (0..60).step_by(7).chain((0..60).rev().step_by(11)) {
                check(&packs[1][i], &mut reader);
                check(&packs[0][59 - i], &mut reader);
            }
            let missing = crate::store::git::object(hash, Kind::Blob, b"absent".to_vec()).unwrap();
            assert_eq!(reader.read(&missing.id, &mut buf), None);
        }
    }

    #[test]
    fn offsets_sort_as_a_comparison_sort_does() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for (n, end) in [(0usize, 1u64), (1, 100), (1000, 3000), (5000, 1 << 40)] {
            let mut pairs: Vec<(u64, u32)> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            while pairs.len() < n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let o = x % end;
                if seen.insert(o) {
                    pairs.push((o, pairs.len() as u32));
                }
            }
            let mut want = pairs.clone();
            want.sort_unstable();
            assert_eq!(sort_by_offset(pairs, end), want, "{n} offsets below {end}");
        }
    }

    /// Keys of (offset << 32 | position) come out of the radix sort in the order a comparison
    /// sort gives them, and so in the order of the pairs' sort, at every pass count.
    #[test]
    fn offset_keys_sort_as_the_pairs_do() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for (n, end) in [
            (0usize, 1u64),
            (1, 100),
            (1000, 3000),
            (5000, 1 << 31),
            (3000, 1 << 32),
        ] {
            let mut offsets = std::collections::HashSet::new();
            while offsets.len() < n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                offsets.insert(x % end);
            }
            let pairs: Vec<(u64, u32)> = offsets.iter().zip(0u32..).map(|(&o, i)| (o, i)).collect();
            let keys: Vec<u64> = pairs
                .iter()
                .map(|&(o, i)| (o << 32) | u64::from(i))
                .collect();
            let mut want = keys.clone();
            want.sort_unstable();
            let got = radix_sort_high(keys, end);
            assert_eq!(got, want, "{n} offsets below {end}");
            let by_pairs: Vec<u64> = sort_by_offset(pairs, end)
                .iter()
                .map(|&(o, i)| (o << 32) | u64::from(i))
                .collect();
            assert_eq!(got, by_pairs);
        }
    }

    #[test]
    fn entry_headers_parse_as_git_writes_them() {
        // A blob of 5 bytes: type 3, size in the low nibble, no continuation.
        assert_eq!(entry_header(&[0x35, 0x78]), Some((Kind::Blob, 5, 1)));
        // A commit of 300 bytes: 300 = 0b1_0010_1100, low nibble 0xc, then 300 >> 4 = 18.
        assert_eq!(
            entry_header(&[0x9c, 18, 0x78]),
            Some((Kind::Commit, 300, 2))
        );
        // Deltas (6, 7) and type 0 are not read here.
        assert_eq!(entry_header(&[0x65]), None);
        assert_eq!(entry_header(&[0x75]), None);
        assert_eq!(entry_header(&[0x05]), None);
        // A size whose continuation runs off the end.
        assert_eq!(entry_header(&[0xb5]), None);
        assert_eq!(entry_header(&[]), None);
    }
}
