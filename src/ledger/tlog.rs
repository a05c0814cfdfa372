//! The standard tree: an RFC 6962 Merkle tree whose leaves are the 32 raw bytes of each entry
//! hash (leaf `SHA-256(0x00 || entry_hash)`, node `SHA-256(0x01 || left || right)`), kept
//! beside Forum's checkpoint (which hashes hex text and so no transparency-log tool can read).
//!
//! The tree is held as Go's "stored hashes" (`golang.org/x/mod/sumdb/tlog`): appending record
//! `n` stores its leaf hash and the roots of the subtrees it completes, on average two hashes per
//! entry, so roots and proofs of any earlier size read O(log n) stored hashes. The arithmetic is
//! the `tlog_tiles` crate's (a faithful port of Go's package, so our proofs are the ones Go's
//! `tlog.CheckRecord` and `tlog.CheckTree` accept); this module only feeds it entry hashes. Pure:
//! no I/O.

pub(crate) use tlog_tiles::{Hash, HashReader};

/// Why a tree operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlogError {
    #[error("entry hash {0:?} is not 64 hex digits")]
    BadEntryHash(String),
    #[error("size {size} is out of range: the tree has {len} entries")]
    OutOfRange { size: u64, len: u64 },
    #[error("{0}")]
    Tree(String),
}

fn tree_err(e: tlog_tiles::Error) -> TlogError {
    TlogError::Tree(format!("tlog: {e:?}"))
}

/// The 32 raw bytes of an entry hash written as 64 hex digits.
pub(crate) fn entry_hash_bytes(hex: &str) -> Result<[u8; 32], TlogError> {
    let bad = || TlogError::BadEntryHash(hex.to_string());
    if hex.len() != 64 {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
            .map_err(|_| bad())?;
    }
    Ok(out)
}

/// The RFC 6962 leaf hash of an entry: `SHA-256(0x00 || raw entry hash)`.
pub(crate) fn leaf_hash(entry_hash_hex: &str) -> Result<Hash, TlogError> {
    Ok(tlog_tiles::record_hash(&entry_hash_bytes(entry_hash_hex)?))
}

/// Stored hashes read from a slice in Go's stored-hash order.
struct Slice<'a>(&'a [Hash]);

impl HashReader for Slice<'_> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
        indexes
            .iter()
            .map(|&i| {
                self.0
                    .get(usize::try_from(i).map_err(|_| tlog_tiles::Error::IndexesNotInTree)?)
                    .copied()
                    .ok_or(tlog_tiles::Error::IndexesNotInTree)
            })
            .collect()
    }
}

/// The standard tree over a ledger's entries, grown one entry at a time.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    stored: Vec<Hash>,
    len: u64,
}

impl Tree {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The tree over these entry hashes (hex), in seq order.
    pub fn from_entry_hashes<'a>(
        hashes: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, TlogError> {
        let mut t = Self::new();
        for h in hashes {
            t.append(h)?;
        }
        Ok(t)
    }

    /// The number of entries in the tree.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Every stored hash, in Go's stored-hash order (what tiles are cut from).
    pub(crate) fn stored_hashes(&self) -> &[Hash] {
        &self.stored
    }

    /// Appends the next entry (its hash as hex); returns the stored hashes it added.
    pub(crate) fn append(&mut self, entry_hash_hex: &str) -> Result<&[Hash], TlogError> {
        self.append_leaf(leaf_hash(entry_hash_hex)?)
    }

    /// Appends the next leaf hash; returns the stored hashes it added.
    pub(crate) fn append_leaf(&mut self, leaf: Hash) -> Result<&[Hash], TlogError> {
        let new = tlog_tiles::stored_hashes_for_record_hash(self.len, leaf, &Slice(&self.stored))
            .map_err(tree_err)?;
        let at = self.stored.len();
        self.stored.extend(new);
        self.len += 1;
        Ok(&self.stored[at..])
    }

    fn check_size(&self, size: u64) -> Result<(), TlogError> {
        if size == 0 || size > self.len {
            return Err(TlogError::OutOfRange {
                size,
                len: self.len,
            });
        }
        Ok(())
    }

    /// The root of the tree of the first `size` entries.
    pub(crate) fn root(&self, size: u64) -> Result<Hash, TlogError> {
        if size > self.len {
            return Err(TlogError::OutOfRange {
                size,
                len: self.len,
            });
        }
        tlog_tiles::tree_hash(size, &Slice(&self.stored)).map_err(tree_err)
    }

    /// The audit path proving entry `seq` is in the tree of the first `size` entries.
    pub fn inclusion_proof(&self, seq: u64, size: u64) -> Result<Vec<Hash>, TlogError> {
        self.check_size(size)?;
        if seq >= size {
            return Err(TlogError::OutOfRange {
                size: seq,
                len: size,
            });
        }
        tlog_tiles::prove_record(size, seq, &Slice(&self.stored)).map_err(tree_err)
    }

    /// The consistency path proving the tree of `size` entries extends that of `old` entries.
    pub fn consistency_proof(&self, old: u64, size: u64) -> Result<Vec<Hash>, TlogError> {
        self.check_size(size)?;
        if old == 0 || old > size {
            return Err(TlogError::OutOfRange {
                size: old,
                len: size,
            });
        }
        tlog_tiles::prove_tree(size, old, &Slice(&self.stored)).map_err(tree_err)
    }
}

/// The standard root computed while entry hashes stream past, keeping one subtree root per set
/// bit of the count (O(log n) memory), as `verify` needs it for every signed note's size.
#[derive(Debug, Clone, Default)]
pub struct Frontier {
    /// Perfect subtrees, largest first, as (leaf count, root).
    stack: Vec<(u64, Hash)>,
}

impl Frontier {
    /// Adds the next entry, given as its 32 raw hash bytes.
    pub fn push(&mut self, entry_hash: &[u8; 32]) {
        let mut node = (1u64, tlog_tiles::record_hash(entry_hash));
        while let Some(&(size, left)) = self.stack.last() {
            if size != node.0 {
                break;
            }
            self.stack.pop();
            node = (size * 2, tlog_tiles::node_hash(left, node.1));
        }
        self.stack.push(node);
    }

    /// The root of the entries pushed so far (SHA-256 of nothing when none).
    pub fn root(&self) -> Hash {
        let mut it = self.stack.iter().rev();
        let Some(&(_, mut acc)) = it.next() else {
            return tlog_tiles::tree_hash(0, &Slice(&[])).unwrap_or(Hash([0; 32]));
        };
        for &(_, left) in it {
            acc = tlog_tiles::node_hash(left, acc);
        }
        acc
    }
}

/// Whether `path` proves that `leaf` sits at `seq` in the tree of `size` entries with `root`.
pub(crate) fn check_inclusion(path: &[Hash], size: u64, root: Hash, seq: u64, leaf: Hash) -> bool {
    tlog_tiles::check_record(&path.to_vec(), size, root, seq, leaf).is_ok()
}

/// Whether `path` proves that the tree (`size`, `root`) extends (`old`, `old_root`).
pub(crate) fn check_consistency(
    path: &[Hash],
    size: u64,
    root: Hash,
    old: u64,
    old_root: Hash,
) -> bool {
    tlog_tiles::check_tree(&path.to_vec(), size, root, old, old_root).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(h: &Hash) -> String {
        h.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn h(s: &str) -> Hash {
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
        }
        Hash(out)
    }

    /// RFC 6962's eight test leaves (the inputs of Certificate Transparency's reference tests).
    fn rfc_leaves() -> Vec<Vec<u8>> {
        vec![
            vec![],
            vec![0x00],
            vec![0x10],
            vec![0x20, 0x21],
            vec![0x30, 0x31],
            vec![0x40, 0x41, 0x42, 0x43],
            (0x50..=0x57).collect(),
            (0x60..=0x6f).collect(),
        ]
    }

    fn rfc_tree() -> Tree {
        let mut t = Tree::new();
        for l in rfc_leaves() {
            t.append_leaf(tlog_tiles::record_hash(&l)).unwrap();
        }
        t
    }

    #[test]
    fn rfc6962_roots_of_every_prefix() {
        let want = [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
            "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
            "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
            "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
            "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
            "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
        ];
        let t = rfc_tree();
        for (i, w) in want.iter().enumerate() {
            assert_eq!(hex(&t.root(i as u64 + 1).unwrap()), *w, "size {}", i + 1);
        }
        assert_eq!(
            hex(&t.root(0).unwrap()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn rfc6962_inclusion_vectors() {
        let t = rfc_tree();
        let cases: [(u64, u64, &[&str]); 4] = [
            (
                0,
                8,
                &[
                    "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                    "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
                ],
            ),
            (
                5,
                8,
                &[
                    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                    "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
                ],
            ),
            (
                2,
                3,
                &["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"],
            ),
            (
                1,
                5,
                &[
                    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
                    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                ],
            ),
        ];
        let leaves = rfc_leaves();
        for (seq, size, want) in cases {
            let p = t.inclusion_proof(seq, size).unwrap();
            let got: Vec<String> = p.iter().map(hex).collect();
            assert_eq!(got, want, "seq {seq} size {size}");
            let leaf = tlog_tiles::record_hash(&leaves[seq as usize]);
            assert!(check_inclusion(&p, size, t.root(size).unwrap(), seq, leaf));
            assert!(!check_inclusion(
                &p,
                size,
                t.root(size).unwrap(),
                seq,
                h(want[0])
            ));
        }
    }

    #[test]
    fn rfc6962_consistency_vectors() {
        let t = rfc_tree();
        let cases: [(u64, u64, &[&str]); 3] = [
            (
                1,
                8,
                &[
                    "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                    "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
                ],
            ),
            (
                6,
                8,
                &[
                    "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
                    "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
                    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
                ],
            ),
            (
                2,
                5,
                &[
                    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
                ],
            ),
        ];
        for (old, size, want) in cases {
            let p = t.consistency_proof(old, size).unwrap();
            let got: Vec<String> = p.iter().map(hex).collect();
            assert_eq!(got, want, "{old} -> {size}");
            let (r_old, r_new) = (t.root(old).unwrap(), t.root(size).unwrap());
            assert!(check_consistency(&p, size, r_new, old, r_old));
            assert!(!check_consistency(&p, size, r_old, old, r_new));
        }
    }

    #[test]
    fn every_proof_of_a_small_tree_checks() {
        let hashes: Vec<String> = (0..40u8).map(|i| format!("{:02x}", i).repeat(32)).collect();
        let t = Tree::from_entry_hashes(hashes.iter().map(String::as_str)).unwrap();
        for size in 1..=40 {
            let root = t.root(size).unwrap();
            for seq in 0..size {
                let p = t.inclusion_proof(seq, size).unwrap();
                let leaf = leaf_hash(&hashes[seq as usize]).unwrap();
                assert!(check_inclusion(&p, size, root, seq, leaf));
            }
            for old in 1..=size {
                let p = t.consistency_proof(old, size).unwrap();
                assert!(check_consistency(&p, size, root, old, t.root(old).unwrap()));
            }
        }
    }

    #[test]
    fn the_streaming_frontier_gives_the_tree_root_of_every_size() {
        let hashes: Vec<String> = (0..70u8).map(|i| format!("{:02x}", i).repeat(32)).collect();
        let t = Tree::from_entry_hashes(hashes.iter().map(String::as_str)).unwrap();
        let mut f = Frontier::default();
        assert_eq!(f.root(), t.root(0).unwrap());
        for (i, h) in hashes.iter().enumerate() {
            f.push(&entry_hash_bytes(h).unwrap());
            assert_eq!(f.root(), t.root(i as u64 + 1).unwrap(), "size {}", i + 1);
        }
    }

    #[test]
    fn leaves_are_the_raw_entry_hash_bytes() {
        let e = "ab".repeat(32);
        assert_eq!(leaf_hash(&e).unwrap(), tlog_tiles::record_hash(&[0xab; 32]));
        assert!(leaf_hash("xyz").is_err());
        assert!(leaf_hash(&"g".repeat(64)).is_err());
    }

    #[test]
    fn out_of_range_is_an_error() {
        let t = Tree::from_entry_hashes(["00".repeat(32).as_str()]).unwrap();
        assert!(t.root(2).is_err());
        assert!(t.inclusion_proof(1, 1).is_err());
        assert!(t.consistency_proof(0, 1).is_err());
        assert!(t.consistency_proof(2, 1).is_err());
    }
}
