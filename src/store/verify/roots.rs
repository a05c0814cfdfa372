//! Forum's Merkle roots over the records a verify read: the root of the first `upto` entries
//! (the checkpoint reported) and of each size a recorded or signed checkpoint names within
//! them. The chain is checked in order on one thread, but its tree need not be built there:
//! whole aligned chunks of leaves are hashed into perfect subtrees on several threads, and
//! one thread folds them in order, as pushing every leaf would (the promote rule gives the
//! tree RFC 6962's shape, where a perfect subtree at an aligned place is a node of the tree).

use std::collections::HashSet;

use super::body::Rec;
use crate::ledger::hash;
use crate::ledger::merkle::Accumulator;

/// Leaves hashed into one perfect subtree on one thread (a power of two).
const CHUNK: usize = 4096;

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
/// `upto`, in ascending order, and the tree itself (to push more leaves onto); whole chunks are
/// hashed on up to `threads` threads.
pub(super) fn forum_roots(
    recs: &[Rec],
    upto: usize,
    sizes: &HashSet<u64>,
    threads: usize,
) -> (String, Vec<(u64, String)>, Accumulator) {
    let recs = &recs[..upto.min(recs.len())];
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
        let (start, end) = (j * CHUNK, (j + 1) * CHUNK);
        // A size that ends inside this chunk: its leaves pushed one by one onto a copy.
        while let Some(n) = wanted.next_if(|&n| (n as usize) < end) {
            let mut part = acc.clone();
            for r in &recs[start..n as usize] {
                push_leaf(&mut part, r, &mut hex);
            }
            prefix.push((n, part.root()));
        }
        acc.push_subtree(CHUNK as u64, *root);
        if wanted.next_if_eq(&(end as u64)).is_some() {
            prefix.push((end as u64, acc.root()));
        }
    }
    for (i, r) in recs.iter().enumerate().skip(full * CHUNK) {
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
        for upto in [0, 1, 4095, 4096, 8193, 3 * CHUNK, n] {
            for threads in [1, 2, 3] {
                let (root, prefix, acc) = forum_roots(&recs, upto, &sizes, threads);
                assert_eq!(acc.root(), root);
                assert_eq!(
                    root,
                    merkle_root(&hexes[..upto]),
                    "upto {upto}, {threads} threads"
                );
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
}
