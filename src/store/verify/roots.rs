//! Forum's Merkle roots over the records a verify read: the root of the first `upto` entries
//! (the checkpoint reported) and of each size a recorded or signed checkpoint names within
//! them. The chain is checked in order on one thread, but its tree need not be built there:
//! whole aligned chunks of leaves are hashed into perfect subtrees on several threads, and
//! one thread folds them in order, as pushing every leaf would (the promote rule gives the
//! tree RFC 6962's shape, where a perfect subtree at an aligned place is a node of the tree).
//!
//! A verify from the root also hashes those subtrees while it walks, [`AHEAD`] leaves at a
//! time ([`Ahead`]): the thread that collects the checked records sits idle between batches,
//! and a chunk's leaves are known once its records are in, wherever the walk still is. What
//! is left after the walk is the chunk the walk reached last (the root's), the leaves past the
//! last whole chunk, and folding the chunk roots. Before, the whole tree was hashed after the
//! walk, on two new threads and then the main one: 4.6 of 48.7 ms of a 10,000-entry deep
//! verify on a loaded machine, part of it with a core idle (docs/benchmarks.md, session 30).

use std::collections::HashSet;

use super::body::Rec;
use crate::ledger::hash;
use crate::ledger::merkle::Accumulator;

/// Leaves hashed into one perfect subtree on one thread (a power of two).
const CHUNK: usize = 4096;

/// Leaves in one of the subtrees hashed during the walk (a power of two): one walker batch,
/// so the chunk the walk completes last, hashed after it, is small.
pub(super) const AHEAD: usize = 512;

/// Forum's tree's perfect subtrees of [`AHEAD`] leaves, hashed as the records come in during
/// a walk from the root. The tip's seq says how many records to expect, so walk position `i`
/// (from the tip) is leaf `expected - 1 - i`; a chunk is hashed once all its records are in.
/// The roots count only when the walk read exactly `expected` records ([`Ahead::roots`]): a
/// chain longer or shorter than its tip's seq says is hashed after the walk, as before.
pub(super) struct Ahead {
    expected: usize,
    /// Records in so far, per chunk.
    filled: Vec<u32>,
    roots: Vec<Option<[u8; 32]>>,
    /// False once a record came in past `expected`.
    fits: bool,
}

impl Ahead {
    pub(super) fn new(expected: usize) -> Ahead {
        let chunks = expected / AHEAD;
        Ahead {
            expected,
            filled: vec![0; chunks],
            roots: vec![None; chunks],
            fits: true,
        }
    }

    /// Notes that `slots[i]` (walk position `i`) is now filled, and hashes the chunk it
    /// completes, if any.
    pub(super) fn filled(&mut self, i: usize, slots: &[Option<Rec>]) {
        let Some(leaf) = self.expected.checked_sub(i + 1) else {
            self.fits = false;
            return;
        };
        let c = leaf / AHEAD;
        let Some(n) = self.filled.get_mut(c) else {
            return;
        };
        *n += 1;
        if *n as usize != AHEAD {
            return;
        }
        let mut acc = Accumulator::default();
        let mut hex = String::with_capacity(64);
        for leaf in c * AHEAD..(c + 1) * AHEAD {
            match slots.get(self.expected - 1 - leaf) {
                Some(Some(r)) => push_leaf(&mut acc, r, &mut hex),
                _ => return,
            }
        }
        self.roots[c] = acc.perfect_root();
    }

    /// The chunk roots hashed, when the walk read exactly the records expected (`walked`);
    /// else none.
    pub(super) fn roots(self, walked: usize) -> Vec<Option<[u8; 32]>> {
        if self.fits && walked == self.expected {
            self.roots
        } else {
            Vec::new()
        }
    }
}

/// Pushes the leaf of `r`'s entry hash, spelled in hex in `hex`.
pub(super) fn push_leaf(acc: &mut Accumulator, r: &Rec, hex: &mut String) {
    hex.clear();
    hash::push_hex(hex, &r.entry_hash);
    acc.push(hex);
}

/// The raw root of one whole chunk.
fn chunk_root(recs: &[Rec]) -> [u8; 32] {
    let mut acc = Accumulator::default();
    let mut hex = String::with_capacity(64);
    for r in recs {
        push_leaf(&mut acc, r, &mut hex);
    }
    acc.perfect_root()
        .expect("a whole chunk is a perfect subtree")
}

/// The root of `recs[..upto]`, `(n, root of recs[..n])` for each `n` of `sizes` from 1 to
/// `upto`, in ascending order, and the tree itself (to push more leaves onto). With `ahead`
/// (the roots of chunks of [`AHEAD`] leaves from the first, hashed during the walk, `None`
/// where one was not), whole chunks of that size are taken from it; otherwise whole chunks are
/// hashed on up to `threads` threads.
pub(super) fn forum_roots(
    recs: &[Rec],
    upto: usize,
    sizes: &HashSet<u64>,
    threads: usize,
    ahead: &[Option<[u8; 32]>],
) -> (String, Vec<(u64, String)>, Accumulator) {
    let recs = &recs[..upto.min(recs.len())];
    if !ahead.is_empty() {
        let full = recs.len() / AHEAD;
        let chunk_roots: Vec<[u8; 32]> = (0..full)
            .map(|j| match ahead.get(j) {
                Some(Some(root)) => *root,
                _ => chunk_root(&recs[j * AHEAD..(j + 1) * AHEAD]),
            })
            .collect();
        return fold_chunks(recs, AHEAD, &chunk_roots, sizes);
    }
    let full = recs.len() / CHUNK;
    let chunk_roots: Vec<[u8; 32]> = if full < 2 || threads < 2 {
        (0..full)
            .map(|j| chunk_root(&recs[j * CHUNK..(j + 1) * CHUNK]))
            .collect()
    } else {
        let per = full.div_ceil(threads);
        std::thread::scope(|s| {
            let parts: Vec<_> = (0..full)
                .step_by(per)
                .map(|start| {
                    let end = (start + per).min(full);
                    s.spawn(move || {
                        (start..end)
                            .map(|j| chunk_root(&recs[j * CHUNK..(j + 1) * CHUNK]))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            parts
                .into_iter()
                .flat_map(|p| p.join().expect("a Merkle thread panicked"))
                .collect()
        })
    };
    fold_chunks(recs, CHUNK, &chunk_roots, sizes)
}

/// [`forum_roots`] from the roots of the whole chunks of `chunk` leaves of `recs`: the chunks
/// folded in order, the leaves after them pushed one by one, and the root at each of `sizes`.
fn fold_chunks(
    recs: &[Rec],
    chunk: usize,
    chunk_roots: &[[u8; 32]],
    sizes: &HashSet<u64>,
) -> (String, Vec<(u64, String)>, Accumulator) {
    let full = chunk_roots.len();
    let mut wanted: Vec<u64> = sizes
        .iter()
        .copied()
        .filter(|&n| n >= 1 && n <= recs.len() as u64)
        .collect();
    wanted.sort_unstable();
    let mut wanted = wanted.into_iter().peekable();
    let mut prefix = Vec::new();
    let mut acc = Accumulator::default();
    let mut hex = String::with_capacity(64);
    for (j, root) in chunk_roots.iter().enumerate() {
        let (start, end) = (j * chunk, (j + 1) * chunk);
        // A size that ends inside this chunk: its leaves pushed one by one onto a copy.
        while let Some(n) = wanted.next_if(|&n| (n as usize) < end) {
            let mut part = acc.clone();
            for r in &recs[start..n as usize] {
                push_leaf(&mut part, r, &mut hex);
            }
            prefix.push((n, part.root()));
        }
        acc.push_subtree(chunk as u64, *root);
        if wanted.next_if_eq(&(end as u64)).is_some() {
            prefix.push((end as u64, acc.root()));
        }
    }
    for (i, r) in recs.iter().enumerate().skip(full * chunk) {
        push_leaf(&mut acc, r, &mut hex);
        let n = i as u64 + 1;
        if wanted.next_if_eq(&n).is_some() {
            prefix.push((n, acc.root()));
        }
    }
    (acc.root(), prefix, acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::merkle::merkle_root;
    use crate::store::verify::body::BodyState;

    fn rec(i: usize) -> Rec {
        let h = hash::sha256_hex(format!("entry {i}").as_bytes());
        Rec {
            seq: i as u64,
            entry_hash: crate::store::git::hex_to_bytes(&h),
            prev_hash: [0; 32],
            extra: None,
            readable: true,
            edited: false,
            body: BodyState::Unchecked,
        }
    }

    /// Chunked and threaded, the roots are those of the leaves one by one: at every edge of a
    /// chunk, inside one, in the tail, on one thread and on several.
    #[test]
    fn chunked_roots_are_the_leaf_by_leaf_roots() {
        let n = 3 * CHUNK + 123;
        let recs: Vec<Rec> = (0..n).map(rec).collect();
        let hexes: Vec<String> = recs.iter().map(|r| hash::hex(&r.entry_hash)).collect();
        let sizes: HashSet<u64> = [1, 2, 4095, 4096, 4097, 5000, 8192, 12288, 12300, 99_999]
            .into_iter()
            .collect();
        // The chunk roots a walk hashes as its records come in (filled in a scrambled order),
        // and the same with some of them missing.
        let ahead = walked_ahead(n, n);
        assert_eq!(ahead.len(), n / AHEAD);
        assert!(ahead.iter().all(Option::is_some));
        let mut gaps = ahead.clone();
        for r in gaps.iter_mut().step_by(3) {
            *r = None;
        }
        let modes: [(usize, &[Option<[u8; 32]>]); 5] =
            [(1, &[]), (2, &[]), (3, &[]), (2, &ahead), (2, &gaps)];
        for upto in [0, 1, 511, 512, 513, 4095, 4096, 8193, 3 * CHUNK, n] {
            for (m, (threads, ahead)) in modes.iter().enumerate() {
                let (root, prefix, acc) = forum_roots(&recs, upto, &sizes, *threads, ahead);
                assert_eq!(acc.root(), root);
                assert_eq!(root, merkle_root(&hexes[..upto]), "upto {upto}, mode {m}");
                let want: Vec<u64> = {
                    let mut w: Vec<u64> = sizes
                        .iter()
                        .copied()
                        .filter(|&s| s as usize <= upto)
                        .collect();
                    w.sort_unstable();
                    w
                };
                assert_eq!(prefix.iter().map(|p| p.0).collect::<Vec<_>>(), want);
                for (s, r) in &prefix {
                    assert_eq!(r, &merkle_root(&hexes[..*s as usize]), "size {s}");
                }
            }
        }
    }

    /// The chunk roots an [`Ahead`] expecting `expected` records holds after a walk of `walked`
    /// records, their slots filled in a scrambled order.
    fn walked_ahead(expected: usize, walked: usize) -> Vec<Option<[u8; 32]>> {
        let mut slots: Vec<Option<Rec>> = (0..walked).map(|_| None).collect();
        let mut ahead = Ahead::new(expected);
        let step = 7919;
        for k in 0..walked {
            let i = k * step % walked;
            slots[i] = Some(rec(walked - 1 - i));
            ahead.filled(i, &slots);
        }
        ahead.roots(walked)
    }

    /// A chain longer or shorter than its tip's seq promised leaves no chunk roots: the whole
    /// tree is hashed after the walk, as without them.
    #[test]
    fn chunk_roots_count_only_when_the_walk_read_the_records_expected() {
        assert!(walked_ahead(3000, 3001).is_empty());
        assert!(walked_ahead(3001, 3000).is_empty());
        assert_eq!(walked_ahead(3000, 3000).len(), 3000 / AHEAD);
    }
}
