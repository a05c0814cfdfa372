//! The seq index under `.git/forum/index/NAME.idx`: the commit id of every seq, one after
//! another, so reading entry `seq` needs no walk of the chain. A cache, checked against the ref
//! and repaired when it disagrees; verify never uses it.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use gix::ObjectId;

use super::error::{StoreError, io};
use super::handle::{GitStore, Tip};

pub(super) struct IndexView {
    path: PathBuf,
    width: usize,
    count: u64,
}

impl IndexView {
    pub(super) fn get(&self, seq: u64) -> Option<ObjectId> {
        if seq >= self.count {
            return None;
        }
        let mut f = File::open(&self.path).ok()?;
        f.seek(SeekFrom::Start(seq * self.width as u64)).ok()?;
        let mut b = vec![0u8; self.width];
        f.read_exact(&mut b).ok()?;
        Some(ObjectId::from_bytes_or_panic(&b))
    }
}

/// The ids as the index stores them: raw bytes, one after another.
fn id_bytes(ids: &[ObjectId]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(ids.iter().map(|id| id.as_slice().len()).sum());
    for id in ids {
        bytes.extend_from_slice(id.as_slice());
    }
    bytes
}

/// Reads `buf.len()` bytes at `offset` without moving the file position.
fn read_exact_at(f: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(f, buf, offset)
    }
    #[cfg(not(unix))]
    {
        let mut f = f;
        f.seek(SeekFrom::Start(offset))?;
        f.read_exact(buf)
    }
}

impl GitStore {
    pub(crate) fn index_path(&self) -> PathBuf {
        self.forum_dir()
            .join("index")
            .join(format!("{}.idx", self.name))
    }

    /// The index, extended or rebuilt until it agrees with `tip`.
    pub(super) fn index_for(&self, tip: &Tip) -> Result<IndexView, StoreError> {
        let width = self.hash.len_in_bytes();
        let path = self.index_path();
        let want = tip.entry.seq + 1;
        if let Ok(mut f) = File::open(&path) {
            // The length by seeking (see `read_without_stat`).
            let len = f.seek(SeekFrom::End(0)).unwrap_or(0);
            if len % width as u64 == 0 && len > 0 {
                let count = len / width as u64;
                let mut last = vec![0u8; width];
                if f.seek(SeekFrom::Start((count - 1) * width as u64)).is_ok()
                    && f.read_exact(&mut last).is_ok()
                {
                    let last = ObjectId::from_bytes_or_panic(&last);
                    if count == want && last == tip.commit {
                        return Ok(IndexView { path, width, count });
                    }
                    if count < want {
                        // Extend: walk back from the tip to the last indexed seq.
                        let mut missing = Vec::new();
                        let mut cur = Some(tip.commit);
                        let mut buf = Vec::new();
                        while let Some(id) = cur {
                            let (e, _, parent) = self.read_entry_commit(&id, &mut buf)?;
                            if e.seq + 1 == count {
                                if id == last {
                                    missing.reverse();
                                    self.write_index(&path, Some(&missing))?;
                                    return Ok(IndexView {
                                        path,
                                        width,
                                        count: want,
                                    });
                                }
                                break;
                            }
                            if e.seq < count {
                                break;
                            }
                            missing.push(id);
                            cur = parent;
                        }
                    }
                }
            }
        }
        let ids = self.chain_ids_from(Some(tip.commit))?;
        if ids.len() as u64 != want {
            return Err(StoreError::Corrupt(format!(
                "ledger {}: the tip holds seq {} but the chain has {} commits; run `git forum verify`",
                self.name,
                tip.entry.seq,
                ids.len()
            )));
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        let bytes = id_bytes(&ids);
        // A temporary file of our own: two readers rebuilding at once must not share one.
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io(format!(
            "creating a temporary file in {}",
            dir.display()
        )))?;
        tmp.write_all(&bytes)
            .map_err(io(format!("writing {}", tmp.path().display())))?;
        tmp.persist(&path)
            .map_err(|e| e.error)
            .map_err(io(format!("renaming into {}", path.display())))?;
        Ok(IndexView {
            path,
            width,
            count: want,
        })
    }

    /// Appends `ids` to the index file (the caller checked it is current up to their parent).
    fn write_index(&self, path: &Path, ids: Option<&[ObjectId]>) -> Result<(), StoreError> {
        let Some(ids) = ids else { return Ok(()) };
        let mut f = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io(format!("opening {}", path.display())))?;
        f.write_all(&id_bytes(ids))
            .map_err(io(format!("writing {}", path.display())))
    }

    /// After an append from `parent` (at `parent_seq`) to `new`, extends the index if it was
    /// current; otherwise leaves it for the next read to repair.
    pub(super) fn index_after_append(&self, parent: Option<(ObjectId, u64)>, new: &[ObjectId]) {
        let width = self.hash.len_in_bytes() as u64;
        let path = self.index_path();
        // One open: a new ledger starts an empty index; otherwise the last id is checked and
        // the new ones are appended after it.
        let file = match parent {
            None => {
                if let Some(dir) = path.parent() {
                    let _ = fs::create_dir_all(dir);
                }
                File::create(&path).ok()
            }
            Some((pid, pseq)) => (|| {
                let f = OpenOptions::new()
                    .read(true)
                    .append(true)
                    .open(&path)
                    .ok()?;
                let len = (&f).seek(SeekFrom::End(0)).ok()?;
                if len != (pseq + 1) * width {
                    return None;
                }
                let mut last = vec![0u8; width as usize];
                read_exact_at(&f, &mut last, len - width).ok()?;
                (ObjectId::from_bytes_or_panic(&last) == pid).then_some(f)
            })(),
        };
        if let Some(mut f) = file {
            let _ = f.write_all(&id_bytes(new));
        }
    }
}
