//! Forum's Merkle root over entry hashes (forum-spec §3).
//!
//! Leaves hash `0x00 ‖ hex`, nodes hash `0x01 ‖ left_hex ‖ right_hex`, and a lone last node is
//! promoted unchanged. That promote rule gives the tree the shape of RFC 6962 / RFC 9162, which
//! is what makes inclusion and consistency proofs possible later.

use sha2::{Digest, Sha256};

use super::hash::{GENESIS, hex};

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
#[derive(Debug, Default, Clone)]
pub struct Accumulator {
    /// Perfect subtrees, largest first, as (leaf count, root).
    stack: Vec<(u64, String)>,
}

impl Accumulator {
    pub fn push(&mut self, entry_hash: &str) {
        let mut node = (1u64, leaf_hash(entry_hash));
        while let Some((size, _)) = self.stack.last() {
            if *size != node.0 {
                break;
            }
            let (size, left) = self.stack.pop().expect("checked non-empty");
            node = (size * 2, node_hash(&left, &node.1));
        }
        self.stack.push(node);
    }

    pub fn root(&self) -> String {
        let mut it = self.stack.iter().rev();
        let Some((_, last)) = it.next() else {
            return GENESIS.to_string();
        };
        let mut acc = last.clone();
        for (_, left) in it {
            acc = node_hash(left, &acc);
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        }
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
