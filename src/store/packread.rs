//! Whole-object reads from the repository's packs for `verify --deep`, inflated with
//! libdeflate.
//!
//! A deep verify inflates every commit, tree and body of the ledger once, and most of them are
//! small (a few hundred bytes), where the cost is dominated by setting up each zlib stream's
//! Huffman tables. libdeflate does that markedly faster than the streaming inflater gix uses
//! (measured on a 100,000-entry ledger's commits: 0.33 s against 0.52 s), so verify reads
//! whole, undeltified objects straight from the mapped pack files itself. Anything else (a
//! delta, a loose object, an object in an alternate or a pack that appeared after the reader was
//! opened) goes through gix as before. Nothing read here is trusted: the caller hashes every
//! object it reads and compares the result with the id it asked for.

use std::path::Path;
use std::sync::Arc;

use gix::ObjectId;
use gix::hash::Kind as HashKind;
use gix::objs::Kind;
use gix::odb::pack::Bundle;

/// Objects larger than this are left to gix (a ledger's bodies are capped well below it).
const MAX_OBJECT_BYTES: usize = 2 * crate::ledger::MAX_PAYLOAD_BYTES;

/// The packs present when verify started, shared by its threads.
#[derive(Clone, Default)]
pub(crate) struct Packs(Arc<Vec<Bundle>>);

impl Packs {
    /// Opens every `*.idx` with its pack under `objects/pack`. A pack that cannot be opened is
    /// skipped: its objects are then read through gix, which reports any real problem.
    pub(crate) fn open(objects_dir: &Path, hash: HashKind) -> Packs {
        let Ok(dir) = std::fs::read_dir(objects_dir.join("pack")) else {
            return Packs::default();
        };
        let bundles = dir
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "idx"))
            .filter_map(|p| Bundle::at(&p, hash).ok())
            .collect();
        Packs(Arc::new(bundles))
    }
}

/// One thread's reader: the shared packs and its own decompressor.
pub(crate) struct Reader {
    packs: Packs,
    inflater: libdeflater::Decompressor,
}

impl Reader {
    pub(crate) fn new(packs: Packs) -> Reader {
        Reader {
            packs,
            inflater: libdeflater::Decompressor::new(),
        }
    }

    /// Reads object `id` into `buf` when a pack holds it whole. `None` means "ask gix": the
    /// object is not in these packs, is stored as a delta, or its entry does not inflate to its
    /// recorded size.
    pub(crate) fn read(&mut self, id: &ObjectId, buf: &mut Vec<u8>) -> Option<Kind> {
        for bundle in self.packs.0.iter() {
            let Some(index) = bundle.index.lookup(id) else {
                continue;
            };
            let offset = bundle.index.pack_offset_at_index(index);
            let entry = bundle.pack.entry(offset).ok()?;
            let kind = entry.header.as_kind()?;
            let size = usize::try_from(entry.decompressed_size)
                .ok()
                .filter(|&n| n <= MAX_OBJECT_BYTES)?;
            // The stream runs from the entry's data to somewhere before the end of the pack;
            // libdeflate stops at the end of the stream.
            let data = bundle
                .pack
                .entry_slice(entry.data_offset..bundle.pack.data_len() as u64)?;
            buf.clear();
            buf.resize(size, 0);
            return match self.inflater.zlib_decompress(data, buf) {
                Ok(n) if n == size => Some(kind),
                _ => None,
            };
        }
        None
    }
}
