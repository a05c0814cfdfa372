//! The entry hashes a ledger's tiles are built from, read from its commits (on several
//! threads for a long chain) and checked to link as a chain.

use super::*;

impl GitStore {
    /// Every entry hash from seq 0 to the tip, each entry checked on the way to continue the
    /// chain (its seq, its link to the one before, the hash its fields give). A rebuild needs
    /// nothing else, so this keeps 32 bytes an entry (not every entry) and reads commits only.
    ///
    /// The commit ids come from the seq index (brought up to date first), so the commits are
    /// read and checked in parallel, a range per thread; the index is not trusted for that:
    /// each commit is checked to hash to its id and to have the previous seq's id as its only
    /// parent, and the last id is the tip, so the ids are the ledger's chain.
    pub(crate) fn chain_hashes(
        &self,
        tip: &super::super::git::Tip,
    ) -> Result<Vec<[u8; 32]>, StoreError> {
        let hash = self.object_hash();
        let width = hash.len_in_bytes();
        let n = (tip.entry.seq + 1) as usize;
        let from_index = self.index_for(tip).ok().and_then(|_| {
            let bytes = std::fs::read(self.index_path()).ok()?;
            (bytes.len() == n * width).then_some(bytes)
        });
        if let Some(ids) = from_index
            && let Ok(out) = self.hashes_of_chain(tip, &ids, n)
        {
            return Ok(out);
        }
        // No index, or one that does not describe the chain (it is only a cache): the ids
        // from a walk of the commits.
        let ids: Vec<u8> = self
            .chain_ids_from(Some(tip.commit))?
            .iter()
            .flat_map(|id| id.as_slice().to_vec())
            .collect();
        self.hashes_of_chain(tip, &ids, n).map_err(|seq| {
            StoreError::Corrupt(format!(
                "entry {seq} does not continue the chain; run `git forum verify`"
            ))
        })
    }

    /// [`Self::chain_hashes`] with the commit ids given (raw, one after another): the hashes,
    /// or the first seq whose commit or entry does not continue the chain.
    fn hashes_of_chain(
        &self,
        tip: &super::super::git::Tip,
        ids: &[u8],
        n: usize,
    ) -> Result<Vec<[u8; 32]>, u64> {
        use super::super::packread::{Packs, Reader};
        let hash = self.object_hash();
        let width = hash.len_in_bytes();
        let id_at = |k: usize| ObjectId::from_bytes_or_panic(&ids[k * width..(k + 1) * width]);
        if ids.len() != n * width || id_at(n - 1) != tip.commit {
            return Err(tip.entry.seq);
        }
        let mut out = vec![[0u8; 32]; n];
        let threads = std::thread::available_parallelism()
            .map(|t| t.get())
            .unwrap_or(1)
            .clamp(1, 4)
            .min(n.div_ceil(4096));
        let per = n.div_ceil(threads);
        let packs = Packs::open(&self.objects_dir(), hash);
        let shared = self.repo().clone().into_sync();
        // Each range gives the prev_hash of its first entry, or the first seq it found broken.
        let ranges: Vec<Result<[u8; 32], u64>> = std::thread::scope(|sc| {
            let handles: Vec<_> = out
                .chunks_mut(per)
                .enumerate()
                .map(|(c, chunk)| {
                    let (packs, shared, id_at) = (packs.clone(), shared.clone(), &id_at);
                    sc.spawn(move || {
                        let repo = shared.to_thread_local();
                        let mut reader = Reader::new(packs);
                        hash_range(&repo, &mut reader, hash, id_at, c * per, chunk)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(Err(0)))
                .collect()
        });
        let mut first_bad = None;
        for (c, r) in ranges.iter().enumerate() {
            let bad = match r {
                Err(seq) => Some(*seq),
                // The range's first link: GENESIS at seq 0, else the range before's last hash.
                Ok(prev) if c == 0 && *prev != [0u8; 32] => Some(0),
                Ok(prev) if c > 0 && *prev != out[c * per - 1] => Some((c * per) as u64),
                Ok(_) => None,
            };
            if let Some(seq) = bad {
                first_bad = Some(first_bad.map_or(seq, |b: u64| b.min(seq)));
            }
        }
        match first_bad {
            Some(seq) => Err(seq),
            None => Ok(out),
        }
    }
}

/// Reads and checks the commit `id` of seq `seq` for a tile rebuild: a commit that hashes to
/// its name, whose only parent is `parent`, holding the entry of that seq with the hash its
/// fields give. Returns the entry hash and prev_hash, or `None` when anything is off.
fn check_one(
    repo: &gix::Repository,
    reader: &mut super::super::packread::Reader,
    buf: &mut Vec<u8>,
    hash: gix::hash::Kind,
    id: &ObjectId,
    seq: u64,
    parent: Option<&ObjectId>,
) -> Option<([u8; 32], [u8; 32])> {
    use super::super::git::{entry_from_message, hex_to_bytes, parse_commit};
    use crate::ledger::hash::is_hash;
    use gix::objs::Kind;
    let kind = match reader.read(id, buf) {
        Some(k) => k,
        None => crate::store::odb::try_find(repo, id, buf).ok()??,
    };
    if kind != Kind::Commit || gix::objs::compute_hash(hash, Kind::Commit, buf).ok()? != *id {
        return None;
    }
    let raw = parse_commit(buf, hash)?;
    if raw.parents.len() > 1 || raw.parents.first() != parent {
        return None;
    }
    let e = entry_from_message(raw.message).ok()?;
    let ok = e.seq == seq
        && is_hash(&e.entry_hash)
        && is_hash(&e.prev_hash)
        && e.computed_hash() == e.entry_hash;
    ok.then(|| (hex_to_bytes(&e.entry_hash), hex_to_bytes(&e.prev_hash)))
}

/// Hashes the entries from seq `start` of the chain whose commit ids `id_at` gives into
/// `chunk`, each checked to link to the one before: the prev_hash of the first, or the first
/// seq found broken.
fn hash_range(
    repo: &gix::Repository,
    reader: &mut super::super::packread::Reader,
    hash: gix::hash::Kind,
    id_at: &dyn Fn(usize) -> ObjectId,
    start: usize,
    chunk: &mut [[u8; 32]],
) -> Result<[u8; 32], u64> {
    let mut buf = Vec::new();
    let mut first_prev = None;
    let mut last: Option<[u8; 32]> = None;
    for (j, slot) in chunk.iter_mut().enumerate() {
        let k = start + j;
        let parent = (k > 0).then(|| id_at(k - 1));
        let checked = check_one(
            repo,
            reader,
            &mut buf,
            hash,
            &id_at(k),
            k as u64,
            parent.as_ref(),
        );
        match checked {
            Some((h, prev)) if last.is_none_or(|l| l == prev) => {
                first_prev.get_or_insert(prev);
                *slot = h;
                last = Some(h);
            }
            _ => return Err(k as u64),
        }
    }
    first_prev.ok_or(start as u64)
}
