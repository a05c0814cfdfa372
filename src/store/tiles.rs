//! The standard tree as C2SP tlog-tiles (height 8) kept in git: one commit on
//! `refs/forum/tiles/NAME` whose tree is the static layout (`tile/L/N[.p/W]` hash tiles and
//! `tile/entries/N[.p/W]` data tiles holding each entry hash), and `tiles export DIR` writing the
//! same layout plus `checkpoint` (the signed note) for any static web host.
//!
//! The tiles are what makes `prove` and `checkpoint --note` cost O(log n): they read the few
//! tiles a root or a proof needs (Go's `TileHashReader`, which authenticates every tile it reads
//! against the tiled root) instead of every entry. The commit's message records the tiled size,
//! the standard root, the ledger commit of the last tiled entry and Forum's perfect-subtree roots,
//! so a stale ref is extended from its last size by reading only the new entries (each checked
//! against its predecessor's hash); a ref that is missing, tampered or no longer on the ledger's
//! chain is rebuilt from every entry. Tiles are a cache, never a source of truth: `verify` never
//! reads them, and a note they disagree with sends them to be rebuilt before anything is said.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

use gix::ObjectId;
use tlog_tiles::{Tile, TileHashReader, TileReader};

use super::git::{GitStore, StoreError};
use crate::ledger::Entry;
use crate::ledger::merkle::Accumulator;
use crate::ledger::tlog::{Hash, HashReader, Tree};

/// The tile height C2SP tlog-tiles fixes.
pub(crate) const HEIGHT: u8 = 8;

/// Where a ledger's tiles live.
pub(crate) fn tiles_ref(ledger: &str) -> String {
    format!("refs/forum/tiles/{ledger}")
}

struct Stored<'a>(&'a [Hash]);

impl HashReader for Stored<'_> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
        indexes
            .iter()
            .map(|&i| {
                self.0
                    .get(i as usize)
                    .copied()
                    .ok_or(tlog_tiles::Error::IndexesNotInTree)
            })
            .collect()
    }
}

/// A tile's C2SP path: Go's path without its height component.
fn c2sp_path(t: &Tile) -> String {
    let p = t.path();
    p.strip_prefix(&format!("tile/{HEIGHT}/"))
        .map(|rest| format!("tile/{rest}"))
        .unwrap_or(p)
}

/// Why the tile files of a tree could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TileFilesError {
    /// A tile's hashes could not be read from the tree.
    #[error("reading tile {path}: {source:?}")]
    Read {
        path: String,
        #[source]
        source: tlog_tiles::tlog::Error,
    },
    /// Fewer entry hashes than the tree has entries.
    #[error("no entry {0}")]
    NoEntry(u64),
}

/// Every tile file of the tree of the first `size` entries of `tree`, with `entry_hashes` (raw)
/// for the data tiles: `(path, bytes)`, paths in the C2SP layout. Pure.
pub(crate) fn tile_files(
    tree: &Tree,
    size: u64,
    entry_hashes: &[[u8; 32]],
) -> Result<Vec<(String, Vec<u8>)>, TileFilesError> {
    let mut out = Vec::new();
    let reader = Stored(tree.stored_hashes());
    for t in Tile::new_tiles(HEIGHT, 0, size) {
        let data = t
            .read_data(&reader)
            .map_err(|source| TileFilesError::Read {
                path: t.path(),
                source,
            })?;
        out.push((c2sp_path(&t), data));
        if t.level() == 0 {
            // The data tile beside each level-0 tile: each entry as a big-endian u16 length and
            // its bytes (the entry's 32-byte hash, the leaf's input).
            let start = t.level_index() << HEIGHT;
            let mut bytes = Vec::with_capacity(t.width() as usize * 34);
            for i in start..start + u64::from(t.width()) {
                let h = entry_hashes
                    .get(i as usize)
                    .ok_or(TileFilesError::NoEntry(i))?;
                bytes.extend_from_slice(&32u16.to_be_bytes());
                bytes.extend_from_slice(h);
            }
            out.push((data_path(&t), bytes));
        }
    }
    Ok(out)
}

/// Writes `files` (and `extra`) under `dir`, creating directories.
pub(crate) fn write_layout(dir: &Path, files: &[(String, Vec<u8>)]) -> std::io::Result<()> {
    for (p, bytes) in files {
        let path = dir.join(p);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, bytes)?;
    }
    Ok(())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex32(s: &str) -> Option<[u8; 32]> {
    crate::ledger::tlog::entry_hash_bytes(s).ok()
}

fn corrupt(why: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("tiles: {why}"))
}

/// The standard tree as the tiles ref holds it, brought up to the ledger's tip.
#[derive(Debug, Clone)]
pub(crate) struct Tiled {
    /// The number of entries tiled (the ledger's length).
    pub(crate) size: u64,
    /// The standard root of all of them.
    pub(crate) root: Hash,
    /// Forum's root of the same entries.
    pub(crate) forum_root: String,
    /// Whether the tiles were rebuilt from every entry (missing, tampered or off the chain).
    pub(crate) rebuilt: bool,
    tree: ObjectId,
}

/// What a tiles commit records about itself (its message).
struct State {
    size: u64,
    root: Hash,
    tip: ObjectId,
    forum: Accumulator,
    tree: ObjectId,
}

fn state_message(size: u64, root: &Hash, tip: &ObjectId, forum: &Accumulator) -> String {
    let mut m = format!("tiles {size} {}\n\ntip {tip}\n", hex(&root.0));
    for (n, r) in forum.stack() {
        m.push_str(&format!("forum {n} {r}\n"));
    }
    m
}

fn parse_state(message: &str, tree: ObjectId) -> Option<State> {
    let mut lines = message.lines();
    let mut head = lines.next()?.strip_prefix("tiles ")?.split(' ');
    let size: u64 = head.next()?.parse().ok()?;
    let root = Hash(unhex32(head.next()?)?);
    let mut tip = None;
    let mut stack = Vec::new();
    for l in lines {
        if let Some(t) = l.strip_prefix("tip ") {
            tip = ObjectId::from_hex(t.as_bytes()).ok();
        } else if let Some(f) = l.strip_prefix("forum ") {
            let (n, r) = f.split_once(' ')?;
            stack.push((n.parse().ok()?, r.to_string()));
        }
    }
    // The subtree sizes are the set bits of the size, largest first.
    let sum: u64 = stack.iter().map(|(n, _)| *n).sum();
    (sum == size).then_some(State {
        size,
        root,
        tip: tip?,
        forum: Accumulator::from_stack(stack)?,
        tree,
    })
}

/// Tiles of the tree of `size` entries read from one git tree, each blob read once.
///
/// Every full tile handed out is first checked against the hash its parent tile holds for it,
/// up to a partial tile (which the root check covers). Go's `TileHashReader`, which the
/// `tlog_tiles` crate ports line for line, leaves some full tiles unchecked: it starts checking
/// parents at the count of subtree roots instead of the count of tiles they were read from, so a
/// full tile read beside the root's tiles passes whatever it holds.
struct GitTiles<'a> {
    repo: &'a gix::Repository,
    tree: ObjectId,
    size: u64,
    cache: RefCell<HashMap<String, Vec<u8>>>,
}

impl<'a> GitTiles<'a> {
    fn new(repo: &'a gix::Repository, tree: ObjectId, size: u64) -> Self {
        Self {
            repo,
            tree,
            size,
            cache: RefCell::default(),
        }
    }

    /// A tile's data, a full one only once it matches its parents.
    fn read(&self, t: &Tile) -> Result<Vec<u8>, tlog_tiles::Error> {
        let data = self
            .blob(&c2sp_path(t))
            .ok_or(tlog_tiles::Error::InvalidTile)?;
        let (mut child, mut child_data) = (*t, data.clone());
        while child.width() == 1 << HEIGHT {
            let Some(p) = child.parent(1, self.size) else {
                break;
            };
            let pd = self
                .blob(&c2sp_path(&p))
                .ok_or(tlog_tiles::Error::InvalidTile)?;
            let at = tlog_tiles::stored_hash_index(p.level() * p.height(), child.level_index());
            if p.hash_at_index(&pd, at)? != Tile::subtree_hash(&child_data) {
                return Err(tlog_tiles::Error::InconsistentTile);
            }
            (child, child_data) = (p, pd);
        }
        Ok(data)
    }

    fn blob(&self, path: &str) -> Option<Vec<u8>> {
        if let Some(b) = self.cache.borrow().get(path) {
            return Some(b.clone());
        }
        let tree = self.repo.find_tree(self.tree).ok()?;
        let entry = tree.lookup_entry_by_path(path).ok()??;
        let data = entry.object().ok()?.detach().data;
        self.cache
            .borrow_mut()
            .insert(path.to_string(), data.clone());
        Some(data)
    }
}

impl TileReader for GitTiles<'_> {
    fn height(&self) -> u8 {
        HEIGHT
    }

    fn read_tiles(&self, tiles: &[Tile]) -> Result<Vec<Vec<u8>>, tlog_tiles::Error> {
        tiles.iter().map(|t| self.read(t)).collect()
    }

    fn save_tiles(&self, _: &[Tile], _: &[Vec<u8>]) {}
}

/// Stored hashes of a tree being extended: the old ones from its authenticated tiles, the new
/// ones from memory.
struct Grow<'a> {
    old_count: u64,
    old: Option<&'a dyn HashReader>,
    new: &'a [Hash],
}

impl HashReader for Grow<'_> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
        let old: Vec<u64> = indexes
            .iter()
            .copied()
            .filter(|&i| i < self.old_count)
            .collect();
        let mut old_hashes = match (&self.old, old.is_empty()) {
            (_, true) => Vec::new(),
            (Some(r), false) => r.read_hashes(&old)?,
            (None, false) => return Err(tlog_tiles::Error::IndexesNotInTree),
        }
        .into_iter();
        indexes
            .iter()
            .map(|&i| {
                if i < self.old_count {
                    old_hashes.next().ok_or(tlog_tiles::Error::IndexesNotInTree)
                } else {
                    self.new
                        .get((i - self.old_count) as usize)
                        .copied()
                        .ok_or(tlog_tiles::Error::IndexesNotInTree)
                }
            })
            .collect()
    }
}

fn edit_err(e: impl std::fmt::Display) -> StoreError {
    corrupt(format!("tiles tree: {e}"))
}

fn tlog_err(e: tlog_tiles::Error) -> StoreError {
    corrupt(format!("{e}"))
}

impl Tiled {
    fn with_reader<T>(
        &self,
        store: &GitStore,
        f: impl FnOnce(&TileHashReader<'_>) -> Result<T, tlog_tiles::Error>,
    ) -> Result<T, StoreError> {
        let tiles = GitTiles::new(store.repo(), self.tree, self.size);
        let reader = TileHashReader::new(self.size, self.root, &tiles);
        f(&reader).map_err(tlog_err)
    }

    /// The standard root of the first `size` entries.
    pub(crate) fn root_at(&self, store: &GitStore, size: u64) -> Result<Hash, StoreError> {
        if size > self.size {
            return Err(corrupt(format!(
                "size {size} is beyond the {} tiled",
                self.size
            )));
        }
        if size == self.size {
            return Ok(self.root);
        }
        self.with_reader(store, |r| tlog_tiles::tree_hash(size, r))
    }

    /// The audit path of entry `seq` in the tree of the first `size` entries.
    pub(crate) fn inclusion_proof(
        &self,
        store: &GitStore,
        seq: u64,
        size: u64,
    ) -> Result<Vec<Hash>, StoreError> {
        self.with_reader(store, |r| tlog_tiles::prove_record(size, seq, r))
    }

    /// The bytes of the hash tile `tile` (any whose hashes the tiled tree holds whole), read
    /// through tiles authenticated against the tiled root.
    pub(crate) fn tile_data(&self, store: &GitStore, tile: &Tile) -> Result<Vec<u8>, StoreError> {
        self.with_reader(store, |r| tile.read_data(r))
    }

    /// The consistency path from the tree of `old` entries to that of `size` entries.
    pub(crate) fn consistency_proof(
        &self,
        store: &GitStore,
        old: u64,
        size: u64,
    ) -> Result<Vec<Hash>, StoreError> {
        self.with_reader(store, |r| tlog_tiles::prove_tree(size, old, r))
    }
}

/// Checks that `entries` continue the chain after an entry whose hash is `prev` at `first - 1`:
/// each in seq order, naming its predecessor, with the hash its fields give.
fn check_chain(first: u64, prev: &str, entries: &[Entry]) -> Result<(), StoreError> {
    let mut prev = prev.to_string();
    for (i, e) in entries.iter().enumerate() {
        let seq = first + i as u64;
        if e.seq != seq || e.prev_hash != prev || e.computed_hash() != e.entry_hash {
            return Err(StoreError::Corrupt(format!(
                "entry {seq} does not continue the chain; run `git forum verify`"
            )));
        }
        prev = e.entry_hash.clone();
    }
    Ok(())
}

impl GitStore {
    /// The tiles ref's commit and what its message records, when it reads.
    fn tiles_state(&self) -> Option<(ObjectId, State)> {
        let refname = tiles_ref(self.signature_ledger());
        let id = if self.refs_via_git() {
            let hex = super::sign::ref_target(self.repo().git_dir(), &refname).ok()??;
            ObjectId::from_hex(hex.as_bytes()).ok()?
        } else {
            self.repo()
                .try_find_reference(refname.as_str())
                .ok()??
                .peel_to_id()
                .ok()?
                .detach()
        };
        let commit = self.repo().find_commit(id).ok()?;
        let tree = commit.tree_id().ok()?.detach();
        let message = String::from_utf8_lossy(commit.message_raw_sloppy()).to_string();
        Some((commit.id, parse_state(&message, tree)?))
    }

    /// Deletes the tiles ref, so the next [`Self::fresh_tiles`] rebuilds it from every entry.
    pub(crate) fn drop_tiles(&self) -> Result<(), StoreError> {
        let gd = self.repo().git_dir().to_string_lossy().to_string();
        let refname = tiles_ref(self.signature_ledger());
        super::sign::git_ok(
            Path::new("."),
            &["--git-dir", &gd, "update-ref", "-d", &refname],
            None,
        )?;
        Ok(())
    }

    /// The tiles brought up to the ledger's tip: left alone when current, extended from their
    /// last size when the ledger grew on the same chain, rebuilt from every entry otherwise.
    pub(crate) fn fresh_tiles(&self) -> Result<Tiled, StoreError> {
        let tip = self.require_tip()?;
        let len = tip.entry.seq + 1;
        let old = self.tiles_state();
        let base = old.as_ref().map(|(_, s)| s).filter(|s| {
            s.size > 0 && s.size <= len && self.commit_at(s.size - 1).ok().flatten() == Some(s.tip)
        });
        if let Some(s) = base {
            if s.size == len && s.tip == tip.commit {
                // Authenticate the tiles against their root before trusting the ref.
                let tiled = Tiled {
                    size: s.size,
                    root: s.root,
                    forum_root: s.forum.root(),
                    rebuilt: false,
                    tree: s.tree,
                };
                if tiled.root_at(self, s.size.saturating_sub(1)).is_ok() {
                    return Ok(tiled);
                }
            } else {
                let prev = self
                    .get_with_commit(s.size - 1)?
                    .ok_or_else(|| corrupt("the tiled tip is gone"))?
                    .0;
                let mut new = Vec::with_capacity((len - s.size) as usize);
                for seq in s.size..len {
                    let (e, _) = self
                        .get_with_commit(seq)?
                        .ok_or_else(|| corrupt(format!("entry {seq} is missing")))?;
                    new.push(e);
                }
                check_chain(s.size, &prev.entry_hash, &new)?;
                let raw: Vec<[u8; 32]> = new
                    .iter()
                    .map(|e| unhex32(&e.entry_hash).ok_or_else(|| corrupt("a bad entry hash")))
                    .collect::<Result<_, _>>()?;
                if let Ok(t) = self.grow_tiles(Some(s), &raw, tip.commit, old.as_ref().map(|o| o.0))
                {
                    return Ok(t);
                }
            }
        }
        let all = self.chain_hashes(&tip)?;
        let mut t = self.grow_tiles(None, &all, tip.commit, old.as_ref().map(|o| o.0))?;
        t.rebuilt = true;
        Ok(t)
    }

    /// Writes the tiles of `base` extended by `raw` (the new entry hashes in seq order) and
    /// points the ref at them (compare-and-swap against `old_commit`).
    fn grow_tiles(
        &self,
        base: Option<&State>,
        raw: &[[u8; 32]],
        tip: ObjectId,
        old_commit: Option<ObjectId>,
    ) -> Result<Tiled, StoreError> {
        let repo = self.repo();
        let t0 = base.map_or(0, |b| b.size);
        let n = t0 + raw.len() as u64;
        let old_tiles = base.map(|b| GitTiles::new(repo, b.tree, b.size));
        let old_reader = base
            .zip(old_tiles.as_ref())
            .map(|(b, t)| TileHashReader::new(b.size, b.root, t));
        let old_count = tlog_tiles::stored_hash_count(t0);
        let old = old_reader.as_ref().map(|r| r as &dyn HashReader);
        let stored = grown_hashes(old, old_count, t0, raw)?;
        let mut forum = base.map_or_else(Accumulator::default, |b| b.forum.clone());
        let mut hex = String::with_capacity(64);
        for h in raw {
            hex.clear();
            crate::ledger::hash::push_hex(&mut hex, h);
            forum.push(&hex);
        }
        let grow = Grow {
            old_count,
            old: old_reader.as_ref().map(|r| r as &dyn HashReader),
            new: &stored,
        };
        let root = tlog_tiles::tree_hash(n, &grow).map_err(tlog_err)?;
        let mut ed = match base {
            Some(b) => repo.edit_tree(b.tree),
            None => repo.empty_tree().edit(),
        }
        .map_err(|e| corrupt(format!("cannot edit the tiles tree: {e}")))?;
        for t in Tile::new_tiles(HEIGHT, t0, n) {
            let (l, idx) = (t.level(), t.level_index());
            // The old partial tile this one replaces, if any.
            let old_n = t0 >> (u32::from(HEIGHT) * u32::from(l));
            let old_w = old_n.saturating_sub(idx << HEIGHT);
            let replaced = (old_n >> HEIGHT == idx && old_w > 0 && old_w < 1 << HEIGHT)
                .then(|| Tile::new(HEIGHT, l, idx, old_w as u32, false));
            let data = t.read_data(&grow).map_err(tlog_err)?;
            if let Some(o) = &replaced {
                ed.remove(c2sp_path(o).as_str()).map_err(edit_err)?;
            }
            ed.upsert(
                c2sp_path(&t).as_str(),
                gix::object::tree::EntryKind::Blob,
                write_tile(repo, &data)?,
            )
            .map_err(edit_err)?;
            if l == 0 {
                let (bytes, old_path) =
                    data_tile(&t, t0, raw, replaced.as_ref(), old_tiles.as_ref())?;
                if let Some(path) = old_path {
                    ed.remove(path.as_str()).map_err(edit_err)?;
                }
                ed.upsert(
                    data_path(&t).as_str(),
                    gix::object::tree::EntryKind::Blob,
                    write_tile(repo, &bytes)?,
                )
                .map_err(edit_err)?;
            }
        }
        let tree = ed.write().map_err(edit_err)?.detach();
        let tiled = Tiled {
            size: n,
            root,
            forum_root: forum.root(),
            rebuilt: false,
            tree,
        };
        self.commit_tiles(tiled, &tip, &forum, old_commit)
    }

    /// Records `tiled` (its tree already written) as the tiles ref's commit for the ledger at
    /// `tip`, unless the commit there (`old_commit`) already says exactly that.
    fn commit_tiles(
        &self,
        tiled: Tiled,
        tip: &ObjectId,
        forum: &Accumulator,
        old_commit: Option<ObjectId>,
    ) -> Result<Tiled, StoreError> {
        let repo = self.repo();
        let tree = tiled.tree;
        let message = state_message(tiled.size, &tiled.root, tip, forum);
        if let Some(old) = old_commit
            && let Ok(c) = repo.find_commit(old)
            && c.tree_id().ok().map(|t| t.detach()) == Some(tree)
            && String::from_utf8_lossy(c.message_raw_sloppy()) == message
        {
            return Ok(tiled);
        }
        let commit = standalone_commit(repo, tree, &message, "the tiles commit")?;
        let gd = repo.git_dir().to_string_lossy().to_string();
        let refname = tiles_ref(self.signature_ledger());
        let zero = ObjectId::null(repo.object_hash()).to_string();
        let expect = old_commit.map_or(zero, |c| c.to_string());
        let new_id = commit.to_string();
        super::sign::git_ok(
            Path::new("."),
            &[
                "--git-dir",
                &gd,
                "update-ref",
                "-m",
                "forum: tiles",
                &refname,
                &new_id,
                &expect,
            ],
            None,
        )?;
        Ok(tiled)
    }
}

/// The data tile's path beside a level-0 hash tile.
fn data_path(t: &Tile) -> String {
    let mut d = *t;
    d.set_is_data();
    c2sp_path(&d).replacen("tile/data/", "tile/entries/", 1)
}

/// Writes one tile's bytes as a blob.
fn write_tile(repo: &gix::Repository, bytes: &[u8]) -> Result<ObjectId, StoreError> {
    repo.write_blob(bytes)
        .map(|id| id.detach())
        .map_err(|e| StoreError::Git(format!("writing a tile: {e}")))
}

/// The hashes a tree of `t0` records (whose `old_count` stored hashes `old` reads) stores
/// beyond those once the record hashes `raw` are added.
fn grown_hashes(
    old: Option<&dyn HashReader>,
    old_count: u64,
    t0: u64,
    raw: &[[u8; 32]],
) -> Result<Vec<Hash>, StoreError> {
    let mut stored: Vec<Hash> = Vec::with_capacity(raw.len() * 2 + 1);
    for (k, h) in raw.iter().enumerate() {
        let grow = Grow {
            old_count,
            old,
            new: &stored,
        };
        let add = tlog_tiles::stored_hashes_for_record_hash(
            t0 + k as u64,
            tlog_tiles::record_hash(h),
            &grow,
        )
        .map_err(tlog_err)?;
        stored.extend(add);
    }
    Ok(stored)
}

/// The data tile `t` (each record hash with its length) of a tree grown from `t0` records by
/// `raw`: the old partial tile's records (`replaced`, read from `old_tiles`) then the new ones;
/// and the old tile's path, which the new tile replaces.
fn data_tile(
    t: &Tile,
    t0: u64,
    raw: &[[u8; 32]],
    replaced: Option<&Tile>,
    old_tiles: Option<&GitTiles<'_>>,
) -> Result<(Vec<u8>, Option<String>), StoreError> {
    let start = t.level_index() << HEIGHT;
    let mut bytes = Vec::with_capacity(t.width() as usize * 34);
    let mut old_path = None;
    if let (Some(o), Some(tiles)) = (replaced, old_tiles) {
        let path = data_path(o);
        let old = tiles
            .blob(&path)
            .filter(|b| b.len() == o.width() as usize * 34)
            .ok_or_else(|| corrupt(format!("{path} is missing or the wrong size")))?;
        bytes.extend_from_slice(&old);
        old_path = Some(path);
    }
    for i in start.max(t0)..start + u64::from(t.width()) {
        bytes.extend_from_slice(&32u16.to_be_bytes());
        bytes.extend_from_slice(&raw[(i - t0) as usize]);
    }
    Ok((bytes, old_path))
}

mod chain;

/// Writes a commit of `tree` with no parent, git forum's fixed identity and time 0, for a
/// derived ref (the tiles, Forum's tree): what it holds can be rebuilt from the ledger, so no
/// history is kept. `what` names it in the error.
pub(crate) fn standalone_commit(
    repo: &gix::Repository,
    tree: ObjectId,
    message: &str,
    what: &str,
) -> Result<ObjectId, StoreError> {
    let who = gix::actor::Signature {
        name: "git-forum".into(),
        email: "ledger@git-forum.invalid".into(),
        time: gix::date::Time::new(0, 0),
    };
    Ok(repo
        .write_object(&gix::objs::Commit {
            tree,
            parents: Default::default(),
            author: who.clone(),
            committer: who,
            encoding: None,
            message: message.into(),
            extra_headers: Vec::new(),
        })
        .map_err(|e| StoreError::Git(format!("writing {what}: {e}")))?
        .detach())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_of_a_tree_hold_its_hashes_in_the_c2sp_layout() {
        let hashes: Vec<String> = (0..300u32).map(|i| format!("{i:064x}")).collect();
        let raw: Vec<[u8; 32]> = hashes
            .iter()
            .map(|h| crate::ledger::tlog::entry_hash_bytes(h).unwrap())
            .collect();
        let tree = Tree::from_entry_hashes(hashes.iter().map(String::as_str)).unwrap();
        let files = tile_files(&tree, 300, &raw).unwrap();
        let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "tile/0/000",
                "tile/entries/000",
                "tile/0/001.p/44",
                "tile/entries/001.p/44",
                "tile/1/000.p/1"
            ]
        );
        assert_eq!(files[0].1.len(), 256 * 32);
        assert_eq!(&files[0].1[..32], &tree.stored_hashes()[0].0);
        assert_eq!(files[1].1.len(), 256 * 34);
        assert_eq!(&files[1].1[2..34], &raw[0]);
        // The one level-1 hash is the root of the first 256 entries.
        assert_eq!(files[4].1, tree.root(256).unwrap().0.to_vec());
    }
}
