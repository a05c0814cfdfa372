//! Forum's tree kept as chunks of subtree hashes, so a root or a proof over n entries reads
//! O(log n) small pieces instead of every entry hash.
//!
//! A *perfect subtree* at level `l`, index `i`, covers the leaves `[i << l, (i + 1) << l)`; its
//! root is the same whatever the tree's size, since the promote rule gives Forum's tree the RFC
//! 6962 shape. Every [`SPAN`]-th level is *stored*: level 0 holds the leaf hashes, level 8 the
//! roots of whole 256-leaf subtrees, level 16 those of whole 65,536-leaf subtrees, and so on, each
//! level cut into chunks of [`WIDTH`] hashes (the last chunk of a level may be shorter). A level
//! between two stored ones is computed from at most 128 hashes of one chunk below it.
//!
//! Everything here is pure: a [`Subtrees`] source hands out perfect-subtree roots (from a git
//! tree, from memory), [`root_from`], [`inclusion_from`] and [`consistency_from`] give the same
//! strings as [`merkle_root`](super::merkle_root), [`inclusion_path`](super::inclusion_path) and
//! [`consistency_proof`](super::consistency_proof) over the full list, and [`Builder`] turns entry
//! hashes into chunks, resuming from the last partial chunk of each level.

use super::{leaf_raw, node_raw};
use crate::ledger::hash::{GENESIS, hex};

/// Levels between two stored levels.
pub(crate) const SPAN: u32 = 8;
/// Hashes in a full chunk.
pub(crate) const WIDTH: usize = 1 << SPAN;

/// A source of perfect-subtree roots (raw SHA-256 bytes).
pub(crate) trait Subtrees {
    type Error;
    /// The root of the perfect subtree of leaves `[index << level, (index + 1) << level)`; the
    /// caller asks only for subtrees within the tree the source holds.
    fn perfect(&self, level: u32, index: u64) -> Result<[u8; 32], Self::Error>;
}

/// The raw leaf hash of an entry hash (64 hex digits): the level-0 hash the chunks hold.
pub(crate) fn leaf_of(entry_hash: &str) -> [u8; 32] {
    leaf_raw(entry_hash)
}

/// The raw root of `hashes`, a whole number of pairs at every level (a power-of-two count).
pub(crate) fn fold(hashes: &[[u8; 32]]) -> [u8; 32] {
    debug_assert!(hashes.len().is_power_of_two());
    let mut level: Vec<[u8; 32]> = hashes.to_vec();
    while level.len() > 1 {
        level = level.chunks(2).map(|p| node_raw(&p[0], &p[1])).collect();
    }
    level[0]
}

/// The root of perfect subtree `(level, index)` from the stored level below it, whose hashes
/// `chunk` (index `chunk_index` of its level) holds.
pub(crate) fn perfect_from_chunk(
    chunk: &[[u8; 32]],
    chunk_index: u64,
    level: u32,
    index: u64,
) -> Option<[u8; 32]> {
    let up = level % SPAN;
    let first = (index << up) - (chunk_index << SPAN);
    let hashes = chunk.get(first as usize..(first as usize) + (1usize << up))?;
    Some(fold(hashes))
}

/// The raw root of leaves `[lo, hi)` (not empty), a range whose start is aligned as every range
/// of RFC 9162's recursion is: the right fold of its perfect subtrees, largest first.
fn range_root<S: Subtrees>(s: &S, lo: u64, hi: u64) -> Result<[u8; 32], S::Error> {
    let mut pieces = Vec::new();
    let mut at = lo;
    while at < hi {
        let mut size = 1u64 << (63 - (hi - at).leading_zeros());
        if at != 0 {
            size = size.min(1 << at.trailing_zeros());
        }
        let level = size.trailing_zeros();
        pieces.push(s.perfect(level, at >> level)?);
        at += size;
    }
    let mut it = pieces.into_iter().rev();
    let mut acc = it.next().expect("a range that is not empty");
    for left in it {
        acc = node_raw(&left, &acc);
    }
    Ok(acc)
}

/// Forum's root of the first `size` entries: [`super::merkle_root`] of their hashes.
pub(crate) fn root_from<S: Subtrees>(s: &S, size: u64) -> Result<String, S::Error> {
    if size == 0 {
        return Ok(GENESIS.to_string());
    }
    Ok(hex(&range_root(s, 0, size)?))
}

/// The largest power of two strictly below `n` (n ≥ 2).
fn split(n: u64) -> u64 {
    1 << (63 - (n - 1).leading_zeros())
}

/// [`super::inclusion_path`] of entry `index` in the tree of the first `size` entries.
pub(crate) fn inclusion_from<S: Subtrees>(
    s: &S,
    size: u64,
    index: u64,
) -> Result<Vec<String>, S::Error> {
    assert!(index < size, "index within the tree");
    let (mut lo, mut hi) = (0u64, size);
    let mut siblings = Vec::new();
    while hi - lo > 1 {
        let k = split(hi - lo);
        if index < lo + k {
            siblings.push((lo + k, hi));
            hi = lo + k;
        } else {
            siblings.push((lo, lo + k));
            lo += k;
        }
    }
    siblings
        .into_iter()
        .rev()
        .map(|(a, b)| range_root(s, a, b).map(|r| hex(&r)))
        .collect()
}

/// [`super::consistency_proof`] of the tree of the first `size` entries against its first `old`.
pub(crate) fn consistency_from<S: Subtrees>(
    s: &S,
    size: u64,
    old: u64,
) -> Result<Vec<String>, S::Error> {
    assert!(old <= size, "old size within the tree");
    let mut out = Vec::new();
    if old == 0 || old == size {
        return Ok(out);
    }
    // RFC 9162 §2.1.4.1's SUBPROOF over leaves [lo, hi), iteratively: the subtrees beside the
    // path are pushed after the recursion's result, so they are collected and appended reversed.
    let (mut m, mut lo, mut hi, mut complete) = (old, 0u64, size, true);
    let mut after = Vec::new();
    loop {
        let n = hi - lo;
        if m == n {
            if !complete {
                out.push(hex(&range_root(s, lo, hi)?));
            }
            break;
        }
        let k = split(n);
        if m <= k {
            after.push((lo + k, hi));
            hi = lo + k;
        } else {
            after.push((lo, lo + k));
            m -= k;
            lo += k;
            complete = false;
        }
    }
    for (a, b) in after.into_iter().rev() {
        out.push(hex(&range_root(s, a, b)?));
    }
    Ok(out)
}

/// The hashes of a chunk's bytes (32 each), `None` when the length is not a whole number of them.
pub(crate) fn hashes_of(bytes: &[u8]) -> Option<Vec<[u8; 32]>> {
    if !bytes.len().is_multiple_of(32) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(32)
            .map(|c| c.try_into().expect("32 bytes"))
            .collect(),
    )
}

/// How many hashes stored level `level` holds for a tree of `size` entries.
pub(crate) fn count_at(size: u64, level: u32) -> u64 {
    if level >= 64 { 0 } else { size >> level }
}

/// The stored levels a tree of `size` entries has hashes at, lowest first.
pub(crate) fn stored_levels(size: u64) -> Vec<u32> {
    (0..)
        .map(|j| j * SPAN)
        .take_while(|&l| count_at(size, l) > 0)
        .collect()
}

/// The number of hashes chunk `index` of stored level `level` holds in a tree of `size` entries
/// (0 when it holds none).
pub(crate) fn chunk_width(size: u64, level: u32, index: u64) -> usize {
    let count = count_at(size, level);
    count.saturating_sub(index << SPAN).min(WIDTH as u64) as usize
}

/// A chunk written by [`Builder`]: its stored level, its index in that level, its hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chunk {
    pub(crate) level: u32,
    pub(crate) index: u64,
    pub(crate) hashes: Vec<[u8; 32]>,
}

impl Chunk {
    pub(crate) fn bytes(&self) -> Vec<u8> {
        self.hashes.concat()
    }
}

/// Turns entry hashes, in seq order, into the chunks of every stored level.
#[derive(Debug, Clone, Default)]
pub(crate) struct Builder {
    /// The entries taken so far.
    size: u64,
    /// Per stored level, lowest first: the hashes of its last, partial chunk.
    partial: Vec<Vec<[u8; 32]>>,
    /// Chunks that changed since the builder started, in the order they filled or changed.
    changed: Vec<Chunk>,
}

impl Builder {
    /// A builder resumed at `size` entries from the last partial chunk of each stored level
    /// (`partial[j]` for level `j * SPAN`; an empty one where the level's chunks are all full).
    /// `None` when a partial chunk is not as long as `size` says.
    pub(crate) fn resume(size: u64, partial: Vec<Vec<[u8; 32]>>) -> Option<Builder> {
        let levels = stored_levels(size);
        if partial.len() != levels.len() {
            return None;
        }
        for (l, p) in levels.iter().zip(&partial) {
            if p.len() as u64 != count_at(size, *l) % WIDTH as u64 {
                return None;
            }
        }
        Some(Builder {
            size,
            partial,
            changed: Vec::new(),
        })
    }

    /// Adds the next entry, by its entry hash (64 hex digits).
    pub(crate) fn push(&mut self, entry_hash: &str) {
        self.push_at(0, leaf_raw(entry_hash));
        self.size += 1;
    }

    fn push_at(&mut self, depth: usize, hash: [u8; 32]) {
        if self.partial.len() == depth {
            self.partial.push(Vec::with_capacity(WIDTH));
        }
        self.partial[depth].push(hash);
        if self.partial[depth].len() == WIDTH {
            let full = std::mem::take(&mut self.partial[depth]);
            let root = fold(&full);
            let level = depth as u32 * SPAN;
            let index = (self.size >> level) >> SPAN;
            self.changed.push(Chunk {
                level,
                index,
                hashes: full,
            });
            self.push_at(depth + 1, root);
        }
    }

    /// The entries taken so far.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// The chunks to write: every chunk that filled since the builder started, then each level's
    /// partial chunk (not empty) as it now stands. A chunk that filled replaces the partial one
    /// of the same path.
    pub(crate) fn chunks(&self) -> Vec<Chunk> {
        let mut out = self.changed.clone();
        for (j, p) in self.partial.iter().enumerate() {
            let level = j as u32 * SPAN;
            if !p.is_empty() {
                out.push(Chunk {
                    level,
                    index: count_at(self.size, level) >> SPAN,
                    hashes: p.clone(),
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::{consistency_proof, inclusion_path, merkle_root};
    use super::*;

    /// Perfect-subtree roots from chunks held in memory, keyed by (stored level, chunk index).
    #[derive(Debug, Default)]
    struct InMemory {
        chunks: std::collections::HashMap<(u32, u64), Vec<[u8; 32]>>,
    }

    impl InMemory {
        /// Every chunk of the tree of `hashes` (entry hashes in seq order).
        fn of<S: AsRef<str>>(hashes: &[S]) -> InMemory {
            let mut b = Builder::default();
            hashes.iter().for_each(|h| b.push(h.as_ref()));
            InMemory {
                chunks: b
                    .chunks()
                    .into_iter()
                    .map(|c| ((c.level, c.index), c.hashes))
                    .collect(),
            }
        }
    }

    /// A perfect subtree a source was asked for but does not hold.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Missing {
        level: u32,
        index: u64,
    }

    impl Subtrees for InMemory {
        type Error = Missing;
        fn perfect(&self, level: u32, index: u64) -> Result<[u8; 32], Missing> {
            let stored = level - level % SPAN;
            let chunk_index = (index << (level - stored)) >> SPAN;
            self.chunks
                .get(&(stored, chunk_index))
                .and_then(|c| perfect_from_chunk(c, chunk_index, level, index))
                .ok_or(Missing { level, index })
        }
    }

    fn leaves(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| crate::ledger::hash::sha256_hex(format!("leaf-{i}").as_bytes()))
            .collect()
    }

    /// Every root, audit path and consistency proof from chunks of the first `n` of `all`
    /// equals the one the full list gives, for every seq and every old size.
    fn same_proofs_as_the_full_list(all: &[String], n: usize, roots: &[String]) {
        let h = &all[..n];
        let mem = InMemory::of(h);
        assert_eq!(root_from(&mem, n as u64).unwrap(), roots[n], "n {n}");
        for i in 0..n {
            assert_eq!(
                inclusion_from(&mem, n as u64, i as u64).unwrap(),
                inclusion_path(h, i),
                "n {n} i {i}"
            );
        }
        for (m, root) in roots.iter().enumerate().take(n + 1) {
            assert_eq!(&root_from(&mem, m as u64).unwrap(), root, "n {n} m {m}");
            assert_eq!(
                consistency_from(&mem, n as u64, m as u64).unwrap(),
                consistency_proof(h, m),
                "n {n} m {m}"
            );
        }
    }

    fn roots_of_every_prefix(all: &[String]) -> Vec<String> {
        (0..=all.len()).map(|m| merkle_root(&all[..m])).collect()
    }

    #[test]
    fn chunks_give_the_proofs_of_the_full_list_at_every_size_to_100() {
        let all = leaves(100);
        let roots = roots_of_every_prefix(&all);
        for n in 1..=all.len() {
            same_proofs_as_the_full_list(&all, n, &roots);
        }
    }

    /// The same from 101 to 300, the sizes shared among the cores: the full-list functions
    /// rebuild each subtree from its leaves for every proof, so this takes minutes in a debug
    /// build (15 minutes of one busy core).
    #[test]
    fn heavy_chunks_give_the_proofs_of_the_full_list_at_every_size_from_101_to_300() {
        let all = leaves(300);
        let roots = roots_of_every_prefix(&all);
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        std::thread::scope(|sc| {
            for t in 0..threads {
                let (all, roots) = (&all, &roots);
                sc.spawn(move || {
                    for n in (101..=all.len()).filter(|n| n % threads == t) {
                        same_proofs_as_the_full_list(all, n, roots);
                    }
                });
            }
        });
    }

    /// A builder resumed from its partial chunks writes what one builder over every entry writes.
    #[test]
    fn a_resumed_builder_gives_the_chunks_of_one_pass() {
        let all = leaves(70_000);
        let whole = InMemory::of(&all);
        for cut in [0usize, 1, 255, 256, 257, 65_535, 65_536, 65_537] {
            let first = InMemory::of(&all[..cut]);
            let partial = stored_levels(cut as u64)
                .iter()
                .map(|&l| {
                    let idx = count_at(cut as u64, l) >> SPAN;
                    let w = chunk_width(cut as u64, l, idx);
                    if w == WIDTH || w == 0 {
                        Vec::new()
                    } else {
                        first.chunks[&(l, idx)].clone()
                    }
                })
                .collect();
            let mut b = Builder::resume(cut as u64, partial).expect("its own partial chunks");
            all[cut..].iter().for_each(|h| b.push(h));
            let mut resumed = first.chunks;
            resumed.extend(
                b.chunks()
                    .into_iter()
                    .map(|c| ((c.level, c.index), c.hashes)),
            );
            assert_eq!(resumed, whole.chunks, "cut {cut}");
        }
        assert!(Builder::resume(3, vec![vec![[0u8; 32]; 2]]).is_none());
        assert!(Builder::resume(3, Vec::new()).is_none());
    }

    #[test]
    fn chunk_widths_and_levels_follow_the_size() {
        assert_eq!(stored_levels(0), Vec::<u32>::new());
        assert_eq!(stored_levels(255), vec![0]);
        assert_eq!(stored_levels(256), vec![0, 8]);
        assert_eq!(stored_levels(1_000_000), vec![0, 8, 16]);
        assert_eq!(chunk_width(300, 0, 0), 256);
        assert_eq!(chunk_width(300, 0, 1), 44);
        assert_eq!(chunk_width(300, 0, 2), 0);
        assert_eq!(chunk_width(300, 8, 0), 1);
        assert!(hashes_of(&[0u8; 33]).is_none());
        assert_eq!(hashes_of(&[7u8; 64]).unwrap().len(), 2);
    }
}
