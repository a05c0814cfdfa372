//! Forum's Merkle root over entry hashes (forum-spec §3).
//!
//! Leaves hash `0x00 ‖ hex`, nodes hash `0x01 ‖ left_hex ‖ right_hex`, and a lone last node is
//! promoted unchanged. That promote rule gives the tree the shape of RFC 6962 / RFC 9162, which
//! is what makes inclusion and consistency proofs possible later.

use sha2::{Digest, Sha256};

use super::hash::{GENESIS, hex};

pub(crate) mod chunks;

/// `sha256hex(0x00 ‖ utf8(h))`.
pub fn leaf_hash(h: &str) -> String {
    let mut d = Sha256::new();
    d.update([0u8]);
    d.update(h.as_bytes());
    hex(&d.finalize())
}

/// `sha256hex(0x01 ‖ utf8(l) ‖ utf8(r))`.
pub fn node_hash(l: &str, r: &str) -> String {
    let mut d = Sha256::new();
    d.update([1u8]);
    d.update(l.as_bytes());
    d.update(r.as_bytes());
    hex(&d.finalize())
}

/// The checkpoint of a ledger whose entry hashes are `hashes`, in seq order.
pub fn merkle_root<S: AsRef<str>>(hashes: &[S]) -> String {
    if hashes.is_empty() {
        return GENESIS.to_string();
    }
    let mut level: Vec<String> = hashes.iter().map(|h| leaf_hash(h.as_ref())).collect();
    while level.len() > 1 {
        let mut next = Vec::with_capacity(level.len().div_ceil(2));
        let mut it = level.chunks(2);
        for pair in &mut it {
            match pair {
                [l, r] => next.push(node_hash(l, r)),
                [lone] => next.push(lone.clone()),
                _ => unreachable!("chunks(2) yields one or two items"),
            }
        }
        level = next;
    }
    level.pop().expect("one root remains")
}

/// Computes the same root as [`merkle_root`] while entry hashes stream past, keeping only one
/// subtree root per set bit of the count (O(log n) memory). Valid because the promote rule
/// builds the RFC 6962 tree: the root is the right fold of the perfect subtrees.
///
/// Subtree roots are kept as their 32 raw bytes and spelled in hex only inside a node's
/// preimage (on the stack), so a push allocates nothing: verify pushes every entry of a
/// ledger, on the one thread that checks the chain in order.
#[derive(Debug, Default, Clone)]
pub(crate) struct Accumulator {
    /// Perfect subtrees, largest first, as (leaf count, root).
    stack: Vec<(u64, [u8; 32])>,
}

/// The raw bytes of [`leaf_hash`].
fn leaf_raw(h: &str) -> [u8; 32] {
    let mut d = Sha256::new();
    d.update([0u8]);
    d.update(h.as_bytes());
    d.finalize().into()
}

/// The raw bytes of [`node_hash`] of two roots given as raw bytes.
fn node_raw(l: &[u8; 32], r: &[u8; 32]) -> [u8; 32] {
    let mut pre = [0u8; 129];
    pre[0] = 1;
    hex_into(&mut pre[1..65], l);
    hex_into(&mut pre[65..], r);
    Sha256::digest(pre).into()
}

/// Writes the lowercase hex of `bytes` into `out` (twice as long).
fn hex_into(out: &mut [u8], bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[(b >> 4) as usize];
        pair[1] = DIGITS[(b & 15) as usize];
    }
}

/// The 32 bytes of 64 lowercase hex digits, `None` for anything else.
fn unhex32(h: &str) -> Option<[u8; 32]> {
    if !super::hash::is_hash(h) {
        return None;
    }
    let nibble = |c: u8| if c <= b'9' { c - b'0' } else { c - b'a' + 10 };
    let mut out = [0u8; 32];
    for (o, pair) in out.iter_mut().zip(h.as_bytes().chunks_exact(2)) {
        *o = (nibble(pair[0]) << 4) | nibble(pair[1]);
    }
    Some(out)
}

impl Accumulator {
    /// An accumulator resumed from the perfect subtrees [`Self::stack`] returned, so a cache can
    /// carry Forum's root forward without reading every entry again. `None` when a root is not
    /// 64 lowercase hex digits (no subtree has such a root).
    pub(crate) fn from_stack(stack: Vec<(u64, String)>) -> Option<Self> {
        let stack = stack
            .into_iter()
            .map(|(n, r)| Some((n, unhex32(&r)?)))
            .collect::<Option<_>>()?;
        Some(Self { stack })
    }

    /// The perfect subtrees held, largest first, as (leaf count, root).
    pub(crate) fn stack(&self) -> Vec<(u64, String)> {
        self.stack.iter().map(|(n, r)| (*n, hex(r))).collect()
    }

    pub(crate) fn push(&mut self, entry_hash: &str) {
        // A leaf is a perfect subtree of one.
        self.push_subtree(1, leaf_raw(entry_hash));
    }

    /// Adds a perfect subtree of `leaves` leaves (a power of two) with this raw root, as
    /// pushing its leaves one by one would; the leaves held so far must be a multiple of
    /// `leaves`, as they are when every push before was such a subtree or a single leaf in
    /// whole groups of `leaves`.
    pub(crate) fn push_subtree(&mut self, leaves: u64, root: [u8; 32]) {
        debug_assert!(leaves.is_power_of_two());
        debug_assert!(self.stack.iter().all(|(n, _)| n % leaves == 0));
        let mut node = (leaves, root);
        while let Some(&(size, left)) = self.stack.last() {
            if size != node.0 {
                break;
            }
            self.stack.pop();
            node = (size * 2, node_raw(&left, &node.1));
        }
        self.stack.push(node);
    }

    /// The raw root of the leaves pushed so far when they form one perfect subtree.
    pub(crate) fn perfect_root(&self) -> Option<[u8; 32]> {
        match self.stack.as_slice() {
            [(_, r)] => Some(*r),
            _ => None,
        }
    }

    pub(crate) fn root(&self) -> String {
        let mut it = self.stack.iter().rev();
        let Some((_, last)) = it.next() else {
            return GENESIS.to_string();
        };
        let mut acc = *last;
        for (_, left) in it {
            acc = node_raw(left, &acc);
        }
        hex(&acc)
    }
}

/// The root of `hashes` (entry hashes) as a leaf range; `merkle_root` for a slice.
fn subtree_root<S: AsRef<str>>(hashes: &[S]) -> String {
    merkle_root(hashes)
}

/// The largest power of two strictly below `n` (n ≥ 2).
fn split(n: usize) -> usize {
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

/// The audit path proving entry `index` is in the tree of `hashes` (RFC 9162 §2.1.3.1, with
/// Forum's leaf and node hashes). Empty for a one-entry tree.
pub fn inclusion_path<S: AsRef<str>>(hashes: &[S], index: usize) -> Vec<String> {
    assert!(index < hashes.len(), "index within the tree");
    let mut path = Vec::new();
    let (mut lo, mut hi, mut m) = (0usize, hashes.len(), index);
    let mut siblings = Vec::new();
    while hi - lo > 1 {
        let k = split(hi - lo);
        if m < k {
            siblings.push((lo + k, hi));
            hi = lo + k;
        } else {
            siblings.push((lo, lo + k));
            lo += k;
            m -= k;
        }
    }
    // The path runs from the leaf up: the innermost sibling first.
    for (a, b) in siblings.into_iter().rev() {
        path.push(subtree_root(&hashes[a..b]));
    }
    path
}

/// Checks an audit path (RFC 9162 §2.1.3.2): `entry_hash` at `index` in a tree of `size`
/// entries has root `root`.
pub(crate) fn verify_inclusion(
    entry_hash: &str,
    index: u64,
    size: u64,
    path: &[String],
    root: &str,
) -> bool {
    if index >= size {
        return false;
    }
    let (mut f, mut s) = (index, size - 1);
    let mut r = leaf_hash(entry_hash);
    for p in path {
        if s == 0 {
            return false;
        }
        if f & 1 == 1 || f == s {
            r = node_hash(p, &r);
            if f & 1 == 0 {
                while f & 1 == 0 && f != 0 {
                    f >>= 1;
                    s >>= 1;
                }
            }
        } else {
            r = node_hash(&r, p);
        }
        f >>= 1;
        s >>= 1;
    }
    s == 0 && r == root
}

/// The proof that the tree of `hashes` extends its first `old` entries (RFC 9162 §2.1.4.1).
/// Empty when `old` is 0 or the whole tree.
pub fn consistency_proof<S: AsRef<str>>(hashes: &[S], old: usize) -> Vec<String> {
    assert!(old <= hashes.len(), "old size within the tree");
    if old == 0 || old == hashes.len() {
        return Vec::new();
    }
    fn sub<S: AsRef<str>>(m: usize, d: &[S], complete: bool, out: &mut Vec<String>) {
        let n = d.len();
        if m == n {
            if !complete {
                out.push(subtree_root(d));
            }
            return;
        }
        let k = split(n);
        if m <= k {
            sub(m, &d[..k], complete, out);
            out.push(subtree_root(&d[k..]));
        } else {
            sub(m - k, &d[k..], false, out);
            out.push(subtree_root(&d[..k]));
        }
    }
    let mut out = Vec::new();
    sub(old, hashes, true, &mut out);
    out
}

/// Checks a consistency proof (RFC 9162 §2.1.4.2): the tree of `new_size` entries with root
/// `new_root` extends the tree of `old_size` entries with root `old_root`.
pub(crate) fn verify_consistency(
    old_size: u64,
    new_size: u64,
    old_root: &str,
    new_root: &str,
    proof: &[String],
) -> bool {
    if old_size > new_size {
        return false;
    }
    if old_size == new_size {
        return proof.is_empty() && old_root == new_root;
    }
    if old_size == 0 {
        return proof.is_empty() && old_root == GENESIS;
    }
    let mut proof: Vec<&str> = proof.iter().map(String::as_str).collect();
    if old_size.is_power_of_two() {
        proof.insert(0, old_root);
    }
    let Some((first, rest)) = proof.split_first() else {
        return false;
    };
    let (mut f, mut s) = (old_size - 1, new_size - 1);
    while f & 1 == 1 {
        f >>= 1;
        s >>= 1;
    }
    let (mut fr, mut sr) = (first.to_string(), first.to_string());
    for c in rest {
        if s == 0 {
            return false;
        }
        if f & 1 == 1 || f == s {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            if f & 1 == 0 {
                while f & 1 == 0 && f != 0 {
                    f >>= 1;
                    s >>= 1;
                }
            }
        } else {
            sr = node_hash(&sr, c);
        }
        f >>= 1;
        s >>= 1;
    }
    fr == old_root && sr == new_root && s == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaves(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| crate::ledger::hash::sha256_hex(format!("leaf-{i}").as_bytes()))
            .collect()
    }

    /// Flips one hex digit of `h` at `pos`.
    fn flip(h: &str, pos: usize) -> String {
        let mut b = h.as_bytes().to_vec();
        b[pos] = if b[pos] == b'0' { b'1' } else { b'0' };
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn inclusion_proofs_for_every_seq_of_sizes_1_to_70_and_changed_hashes_fail() {
        for n in 1..=70 {
            let h = leaves(n);
            let root = merkle_root(&h);
            for i in 0..n {
                let path = inclusion_path(&h, i);
                assert!(
                    verify_inclusion(&h[i], i as u64, n as u64, &path, &root),
                    "n {n} i {i}"
                );
                if i + 1 < n {
                    assert!(!verify_inclusion(
                        &h[i],
                        i as u64 + 1,
                        n as u64,
                        &path,
                        &root
                    ));
                }
                // Any changed digit changes the hash string; three positions per hash stand for
                // all 64 (the every-byte test of whole proof files is in the integration tests).
                for (j, p) in path.iter().enumerate() {
                    for pos in [0, 31, 63] {
                        let mut bad = path.clone();
                        bad[j] = flip(p, pos);
                        assert!(
                            !verify_inclusion(&h[i], i as u64, n as u64, &bad, &root),
                            "n {n} i {i} path {j} digit {pos}"
                        );
                    }
                }
                let mut short = path.clone();
                if short.pop().is_some() {
                    assert!(!verify_inclusion(&h[i], i as u64, n as u64, &short, &root));
                }
                let mut long = path.clone();
                long.push(root.clone());
                assert!(!verify_inclusion(&h[i], i as u64, n as u64, &long, &root));
            }
        }
    }

    #[test]
    fn consistency_proofs_for_every_pair_of_sizes_up_to_40() {
        let h = leaves(40);
        for n in 1..=40 {
            let new_root = merkle_root(&h[..n]);
            for m in 0..=n {
                let old_root = merkle_root(&h[..m]);
                let proof = consistency_proof(&h[..n], m);
                assert!(
                    verify_consistency(m as u64, n as u64, &old_root, &new_root, &proof),
                    "{m} -> {n}"
                );
                if m > 0 && m < n {
                    // A different old tree of the same size is not extended.
                    let other = merkle_root(&leaves(m + 1)[1..]);
                    assert!(
                        !verify_consistency(m as u64, n as u64, &other, &new_root, &proof),
                        "{m} -> {n} forged old"
                    );
                    for (j, p) in proof.iter().enumerate() {
                        let mut bad = proof.clone();
                        bad[j] = flip(p, j % 64);
                        assert!(
                            !verify_consistency(m as u64, n as u64, &old_root, &new_root, &bad),
                            "{m} -> {n} proof {j}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn accumulator_agrees_with_the_level_by_level_root() {
        let hashes: Vec<String> = (0..70)
            .map(|i| crate::ledger::hash::sha256_hex(format!("leaf-{i}").as_bytes()))
            .collect();
        let mut acc = Accumulator::default();
        assert_eq!(acc.root(), GENESIS);
        for n in 1..=hashes.len() {
            acc.push(&hashes[n - 1]);
            assert_eq!(acc.root(), merkle_root(&hashes[..n]), "n = {n}");
            // Resumed from its stack, it goes on to the same roots.
            let resumed = Accumulator::from_stack(acc.stack()).expect("its own stack");
            assert_eq!(resumed.root(), acc.root(), "n = {n}");
        }
        // Whole perfect subtrees pushed at once give the roots the leaves give.
        for chunk in [1usize, 2, 4, 8, 16] {
            let mut acc = Accumulator::default();
            for (j, part) in hashes.chunks(chunk).enumerate() {
                if part.len() == chunk {
                    let mut sub = Accumulator::default();
                    part.iter().for_each(|h| sub.push(h));
                    acc.push_subtree(chunk as u64, sub.perfect_root().expect("perfect"));
                } else {
                    part.iter().for_each(|h| acc.push(h));
                }
                let n = (j * chunk + part.len()).min(hashes.len());
                assert_eq!(
                    acc.root(),
                    merkle_root(&hashes[..n]),
                    "chunk {chunk}, n = {n}"
                );
            }
        }
        assert!(Accumulator::from_stack(vec![(1, "not hex".into())]).is_none());
        assert!(Accumulator::from_stack(vec![(1, "AB".repeat(32))]).is_none());
    }

    #[test]
    fn empty_is_genesis_and_one_leaf_is_hashed() {
        assert_eq!(merkle_root::<&str>(&[]), GENESIS);
        assert_eq!(merkle_root(&["ab"]), leaf_hash("ab"));
        assert_ne!(
            merkle_root(&["a", "b", "c"]),
            merkle_root(&["a", "b", "c", "c"])
        );
    }
}
